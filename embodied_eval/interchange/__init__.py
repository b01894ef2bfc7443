"""Files in and out of the store.

- `tables`: CSV / Parquet interchange of episodes and faults (flat columns);
- `parquet`: typed Parquet files of episodes;
- `lerobot`: episodes as a LeRobotDataset v3.0;
- `input_files`, `validation`: reading a file a user hands us, and the typed table reader;
- `pair_rules`: what a pair is, checked when episodes are imported.
"""
