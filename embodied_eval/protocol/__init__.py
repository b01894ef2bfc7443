"""Protocol files: everything fixed ex ante for a reporting window (seed §3 battery B).

- `reader`: reading and validating a protocol file (`load_protocol`, `protocol_from_mapping`);
- `declared_keys`: every key a protocol may hold, declared once (type, default, range);
- `model`: the typed protocol (`Protocol`);
- `closure_audits`: the `[maintenance]` and `[expansion]` closure audits it declares;
- `calibration_file`: the `[sim] calibration` file a protocol may name;
- `task_catalog`: which task ids the engines run, checked against the battery;
- `policy_contract`: what a policy must return, checked at every call.

`from embodied_eval.protocol import load_protocol, Protocol` is the public way in.
"""

from embodied_eval.protocol.model import Protocol as Protocol
from embodied_eval.protocol.reader import example_protocol_path as example_protocol_path
from embodied_eval.protocol.reader import load_protocol as load_protocol
from embodied_eval.protocol.reader import protocol_from_mapping as protocol_from_mapping

__all__ = ["Protocol", "example_protocol_path", "load_protocol", "protocol_from_mapping"]
