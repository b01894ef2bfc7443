"""Protocol files: validation errors name the key; admissibility; canonical hash."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path
from typing import Any

import pytest

from embodied_eval.errors import EvalError
from embodied_eval.protocol.reader import (
    example_protocol_path,
    load_protocol,
    protocol_from_mapping,
)


def example() -> dict[str, Any]:
    return tomllib.loads(example_protocol_path().read_text())


def test_example_protocol_loads_with_defaults_and_hash():
    proto = load_protocol(example_protocol_path())
    assert proto.name == "demo-panda-bench"
    assert set(proto.families) == {"pick_place", "push", "drawer_open", "peg_insert", "tool_use"}
    assert all(len(v) == 5 for v in proto.families.values())
    assert proto.severity_weights == {
        "near_miss": 0.25,
        "minor": 1.0,
        "major": 5.0,
        "critical": 20.0,
    }
    assert proto.confidence == 0.95
    assert proto.majors_allowed is False
    assert (proto.e_anchor_low, proto.e_anchor_high) == (0.0, 1.0)
    assert len(proto.protocol_hash) == 64


def test_defaults_when_optional_sections_are_absent():
    data = example()
    for section in (
        "incidents",
        "embodiment",
        "price_card",
        "stopping",
        "baselines",
        "sim",
        "real",
    ):
        data.pop(section)
    data["protocol"].pop("confidence")
    data["protocol"].pop("majors_allowed")
    proto = protocol_from_mapping(data)
    assert proto.severity_weights["near_miss"] == 0.25
    assert proto.severity_weights["critical"] == 20.0
    assert proto.confidence == 0.95
    assert proto.majors_allowed is False
    assert proto.e_anchor_low == 0.0 and proto.e_anchor_high == 1.0


def test_hash_ignores_formatting_but_not_content(tmp_path: Path):
    text = example_protocol_path().read_text()
    reformatted = tmp_path / "p.toml"
    reformatted.write_text("# a comment\n" + text.replace("= 0.95", "=   0.95"))
    assert (
        load_protocol(reformatted).protocol_hash
        == load_protocol(example_protocol_path()).protocol_hash
    )
    changed = tmp_path / "q.toml"
    changed.write_text(text.replace("base_seed = 20261122", "base_seed = 20261123"))
    assert (
        load_protocol(changed).protocol_hash != load_protocol(example_protocol_path()).protocol_hash
    )


def _mutate(path: list[str], value: Any = None, *, delete: bool = False) -> dict[str, Any]:
    data = copy.deepcopy(example())
    node = data
    for part in path[:-1]:
        node = node[part]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "delete", "key"),
    [
        (["protocol", "name"], None, True, "protocol.name"),
        (["protocol", "base_seed"], "abc", False, "protocol.base_seed"),
        (["protocol", "confidence"], 1.5, False, "protocol.confidence"),
        (["protocol", "colour"], "red", False, "protocol.colour"),
        (["protocol", "majors_allowed"], "no", False, "protocol.majors_allowed"),
        (["window", "start"], "soon", False, "window.start"),
        (["incidents", "weights", "minor"], -1.0, False, "incidents.weights.minor"),
        (["embodiment", "U"], 0.0, False, "embodiment.U"),
        (["randomization", "friction_scale"], [1.2, 0.8], False, "randomization.friction_scale"),
        (["randomization", "gravity"], [1, 2], False, "randomization.gravity"),
        (["sampling", "seeds_per_instance"], 0, False, "sampling.seeds_per_instance"),
        (["sampling", "drifts"], ["tuesday"], False, "sampling.drifts"),
        (["sim", "engines"], ["gazebo"], False, "sim.engines"),
        (["price_card", "energy_per_kwh"], "free", False, "price_card.energy_per_kwh"),
        (["stopping", "method"], "vibes", False, "stopping.method"),
        (["unknown_section"], {}, False, "unknown_section"),
    ],
)
def test_validation_errors_name_the_key(path, value, delete, key):
    with pytest.raises(EvalError) as info:
        protocol_from_mapping(_mutate(path, value, delete=delete))
    assert info.value.key == key
    assert key in str(info.value)


def test_a_family_with_four_instances_is_not_admissible():
    data = example()
    data["battery"]["push"]["instances"] = data["battery"]["push"]["instances"][:4]
    with pytest.raises(EvalError, match="m_min = 5") as info:
        protocol_from_mapping(data)
    assert info.value.key == "battery.push.instances"


def test_duplicate_task_ids_are_rejected():
    data = example()
    data["battery"]["push"]["instances"][1] = data["battery"]["push"]["instances"][0]
    with pytest.raises(EvalError, match="appears twice"):
        protocol_from_mapping(data)


def test_instance_level_target_quality_overrides_family(tmp_path: Path):
    data = example()
    data["battery"]["push"]["instances"][0] = {
        "task_id": "push/rubber_forward",
        "target_quality": 0.6,
    }
    proto = protocol_from_mapping(data)
    assert proto.instance("push/rubber_forward").target_quality == 0.6
    assert proto.instance("push/rubber_left").target_quality == 0.8


def test_missing_and_invalid_files(tmp_path: Path):
    with pytest.raises(EvalError, match="does not exist"):
        load_protocol(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[protocol\nname=")
    with pytest.raises(EvalError, match="not valid TOML"):
        load_protocol(bad)
