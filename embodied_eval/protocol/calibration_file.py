"""The calibration file: the physical parameters `embodied-eval calibrate` fitted for one robot.

A TOML file with the robot it was fitted on (`robot_id`), the protocol and window of the
recordings, the episodes used to fit and to validate, every parameter's estimate with its 95 %
interval and identifiability, the validation residuals before and after, and its own
`content_sha256`: the SHA-256 of the canonical JSON of everything else in the file. A file whose
content no longer matches that hash was edited after the fit and is refused, as is a file fitted
on another robot than the protocol's `[real] robot_id`.

A sim run using a calibration (`[sim] calibration = "calibration.toml"` or `run --calibration`)
applies the identified parameters through the simulator's reality-gap fields (`SIM_FIELDS`);
`NOT_MAPPED` says which parameters a sim episode has no counterpart for. The calibration's hash
goes into the manifest, every episode record and the certificate.
"""

from __future__ import annotations

import hashlib
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embodied_eval.canonical import canonical_json
from embodied_eval.errors import EvalError

FORMAT = 1
#: Each calibrated parameter's field of the simulator's reality gap (both engines apply them).
SIM_FIELDS: dict[str, str] = {
    "payload": "payload_kg",
    "actuator_delay": "actuator_delay_s",
    "actuator_bandwidth": "actuator_bandwidth_hz",
    "contact_softness": "contact_timeconst_s",
    "actuator_gain": "actuator_gain_scale",
    "joint_damping": "joint_damping_scale",
    "link_mass": "link_mass_scale",
    "object_mass": "object_mass_scale",
    "friction": "friction_scale",
}
#: Parameters a sim episode has no counterpart for, and why (every fitted parameter has one now:
#: the sim half runs the robot's own command path, `sim_suites.command_path`).
NOT_MAPPED: dict[str, str] = {}


def content_hash(data: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of a calibration's content (without `content_sha256`)."""
    body = {k: v for k, v in data.items() if k != "content_sha256"}
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise EvalError(f"calibration: {value!r} cannot be written")
        return repr(value)
    if isinstance(value, str):
        return canonical_json(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise EvalError(f"calibration: cannot write {type(value).__name__} values")


def _toml_table(prefix: str, table: Mapping[str, Any], lines: list[str]) -> None:
    plain = {k: v for k, v in table.items() if not isinstance(v, Mapping)}
    if prefix and (plain or not table):  # an empty table is written too: the hash counts it
        lines.append(f"\n[{prefix}]")
    for key, value in plain.items():
        lines.append(f"{key} = {_toml_value(value)}")
    for key, value in table.items():
        if isinstance(value, Mapping):
            _toml_table(f"{prefix}.{key}" if prefix else key, value, lines)


def write_calibration(path: str | Path, data: Mapping[str, Any]) -> str:
    """Write a calibration file (adding its `content_sha256`); returns that hash.

    Values that are not finite (an interval the data cannot bound) must be left out by the
    caller: TOML has them but the hash's canonical JSON does not.
    """
    body = {k: v for k, v in data.items() if k != "content_sha256"}
    digest = content_hash(body)
    lines = [
        "# Fitted by `embodied-eval calibrate`; its content_sha256 covers everything below, so an",
        "# edited file is refused. Calibrate again instead of editing.",
    ]
    _toml_table("", {"content_sha256": digest, **body}, lines)
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return digest


@dataclass(frozen=True)
class Calibration:
    """A verified calibration file.

    Attributes:
        path: where it was read from.
        sha256: its content hash (what manifests, episodes and certificates carry).
        robot_id: the robot it was fitted on.
        values: the identified parameters' values by name (not-identified ones are absent).
        data: the whole file.
    """

    path: Path
    sha256: str
    robot_id: str
    values: dict[str, float]
    data: dict[str, Any]

    def sim_gap(self) -> dict[str, Any]:
        """The simulator's reality-gap fields this calibration sets (`SIM_FIELDS`), in the
        file's units: the delay in seconds, the bandwidth in Hz (an unfiltered actuator, fitted
        at τ = 0, has no finite bandwidth and is left out: the sim's default is no filter)."""
        return {
            SIM_FIELDS[name]: float(value)
            for name, value in self.values.items()
            if name in SIM_FIELDS
        }

    def not_mapped(self) -> dict[str, str]:
        """Identified parameters a sim episode cannot apply, with the reason."""
        return {n: NOT_MAPPED[n] for n in self.values if n in NOT_MAPPED}


def read_calibration(path: str | Path, robot_id: str | None = None) -> Calibration:
    """Read and verify a calibration file.

    Args:
        path: the TOML file.
        robot_id: the robot the run is for (the protocol's `[real] robot_id`); a file fitted on
            another robot is refused. None skips that check.

    Raises:
        EvalError: missing or unreadable file, content hash mismatch (edited), other robot.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EvalError(f"calibration {path}: no such file", key="calibration") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise EvalError(f"calibration {path}: unreadable ({exc})", key="calibration") from None
    stated = data.get("content_sha256")
    if not isinstance(stated, str) or data.get("format") != FORMAT:
        raise EvalError(
            f"calibration {path}: not a calibration file (no content_sha256 / format {FORMAT}); "
            "make one with `embodied-eval calibrate`",
            key="calibration",
        )
    actual = content_hash(data)
    if actual != stated:
        raise EvalError(
            f"calibration {path}: edited after it was fitted (content hash {actual[:12]}… ≠ "
            f"{stated[:12]}…); calibrate again instead of editing",
            key="calibration",
        )
    fitted_on = str(data.get("robot_id", ""))
    if robot_id is not None and fitted_on != robot_id:
        raise EvalError(
            f"calibration {path}: fitted on robot {fitted_on!r}, this protocol's robot is "
            f"{robot_id!r}; calibrate on {robot_id!r}'s recordings",
            key="calibration",
        )
    params = data.get("parameters", {})
    values = {
        name: float(entry["value"])
        for name, entry in params.items()
        if isinstance(entry, Mapping) and entry.get("identified") is True
    }
    return Calibration(path=path, sha256=actual, robot_id=fitted_on, values=values, data=data)
