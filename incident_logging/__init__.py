"""incident_logging: the safety officer's incident log.

Taxonomy and threshold table (`taxonomy`, `thresholds`), the rule classifier (`classifier`), the
full incident record (`record`), the append-only hash-chained store with signed reviews, amendments,
exposure ledger and window closes (`store`, `chain`, `workflow`, `amendments`, `exposure`; keys
and signatures are `embodied_eval.store.signing_keys`),
verification (`verify`), import/export (`interchange`), detector-event ingestion (`ingest`), the
window summary (`summary`) and the CLI (`cli`). Depends on `embodied_eval`, never the reverse.

Nothing heavy is imported here, so `embodied-eval --help` stays fast.
"""
