"""`embodied-eval import|export episodes|faults|incidents` and `embodied-eval protocol check|tasks`."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from embodied_eval.cli.common import (
    DbOption,
    JsonOption,
    ProtocolOption,
    console,
    open_store,
    print_json,
    protocol_path,
    window_id,
)
from embodied_eval.errors import EvalError
from embodied_eval.interchange.pair_rules import check_pairs, stored_partners
from embodied_eval.interchange.tables import (
    episodes_from_frame,
    episodes_to_frame,
    faults_from_frame,
    faults_to_frame,
    in_file,
    read_table,
    write_table,
)
from embodied_eval.plugins import INCIDENT_LOG, SIM_ENGINES, resolve
from embodied_eval.protocol.reader import Protocol, load_protocol
from embodied_eval.protocol.sensitivity import run_sweep, sweep_table
from embodied_eval.protocol.task_catalog import catalog_listing, check_instances


class Kind(str, Enum):
    episodes = "episodes"
    faults = "faults"
    incidents = "incidents"
    lerobot = "lerobot"


def import_file(
    kind: Kind = typer.Argument(..., help="What the file holds: episodes, faults or incidents."),
    file: Path = typer.Argument(..., help="A .csv or .parquet file."),
    db: Path | None = DbOption,
    importer: str | None = typer.Option(
        None, "--importer", help="Who imports (recorded in the trial ledger; default: login name)."
    ),
) -> None:
    """Import a CSV/Parquet file into the store (all rows or none; re-importing is harmless).
    Imported episodes are chained in the trial ledger with the importer and the file's SHA-256."""
    if kind is Kind.incidents:
        count = resolve(INCIDENT_LOG["import"])(db, file)
        console.print(f"imported {count} incident(s) from {file}")
        return
    if kind is Kind.lerobot:
        raise EvalError("import lerobot is not supported; import episodes from CSV/Parquet")
    frame = read_table(file)
    # Every row is validated before the store is opened: a refused file touches nothing.
    if kind is Kind.episodes:
        import getpass

        from embodied_eval.canonical import file_sha256

        episodes = in_file(file, episodes_from_frame, frame)
        check_pairs(episodes, where=str(file))
        try:
            user = getpass.getuser()
        except (KeyError, OSError):  # no login name in this environment
            user = "unknown"
        source = {
            "importer": importer or user,
            "source_file": file.name,
            "source_sha256": file_sha256(file),
        }
        with open_store(db) as store:
            check_pairs(episodes, where=str(file), stored=stored_partners(store, episodes))
            new, same = store.write_episodes(
                episodes,
                source=source,
                labels=[f"{file}: row {i + 2}" for i in range(len(episodes))],
            )
    else:
        faults = in_file(file, faults_from_frame, frame)
        with open_store(db) as store:
            new, same = store.write_faults(faults)
    typer.echo(
        f"imported {new} new {kind.value} from {file} ({same} already stored"
        + (", nothing changed)" if new == 0 else ")")
    )


def export_file(
    kind: Kind = typer.Argument(..., help="What to export: episodes, faults or incidents."),
    out: Path = typer.Option(
        ..., "--out", help="Output file (.csv or .parquet by extension); a folder for lerobot."
    ),
    db: Path | None = DbOption,
    window: str | None = typer.Option(None, "--window", help="Only this window id."),
    side: str | None = typer.Option(
        None, "--side", help="lerobot: only this side (sim or real; their frames differ)."
    ),
) -> None:
    """Export from the store to CSV or Parquet (written atomically), or as a LeRobotDataset
    folder (`export lerobot --out DIR [--side sim|real]`)."""
    window = window_id(window)
    if side is not None and side not in ("sim", "real"):
        raise EvalError(f"--side {side!r}: expected sim or real", key="side")
    if kind is Kind.lerobot:
        from embodied_eval.cli.export import export_lerobot_command

        export_lerobot_command(out, db, window, side)
        return
    if side is not None:
        raise EvalError("--side applies to `export lerobot` only", key="side")
    if kind is Kind.incidents:
        count = resolve(INCIDENT_LOG["export"])(db, out, window)
        console.print(f"exported {count} incident(s) to {out}")
        return
    with open_store(db, create=False) as store:
        if kind is Kind.episodes and out.suffix.lower() in (".parquet", ".pq"):
            from embodied_eval.interchange.parquet import write_episodes_parquet

            rows, digest = write_episodes_parquet(store.episodes(window=window), out)
            console.print(f"exported {rows} episodes to {out} (sha256 {digest[:12]}…)")
            return
        if kind is Kind.episodes:
            frame = episodes_to_frame(store.episodes(window=window)).drop(columns=["success"])
        else:
            frame = faults_to_frame(store.faults(window=window))
    digest = write_table(frame, out)
    console.print(f"exported {len(frame)} {kind.value} to {out} (sha256 {digest[:12]}…)")


protocol_app = typer.Typer(help="Check and inspect protocol files.", no_args_is_help=True)


@protocol_app.command("check")
def protocol_check(
    file_arg: Path | None = typer.Argument(
        None, metavar="[PROTOCOL]", help="Protocol TOML file (or --protocol)."
    ),
    file_opt: Path | None = ProtocolOption,
    as_json: bool = JsonOption,
    sensitivity: bool = typer.Option(
        False,
        "--sensitivity",
        help="Also run a quick paired sweep: each declared knob at its range ends (and each "
        "drift setting) against a nominal control arm on the same instances and seeds.",
    ),
    engine: list[str] = typer.Option(
        [], "--engine", help="Sim engine(s) to sweep (default: the protocol's)."
    ),
    instances_per_family: int = typer.Option(
        2, "--instances-per-family", min=1, help="Instances of each family in the sweep."
    ),
    seeds: int = typer.Option(1, "--seeds", min=1, help="Seeds per instance in the sweep."),
    max_steps: int | None = typer.Option(
        None, "--max-steps", min=1, help="Control steps per sweep episode (default: protocol's)."
    ),
    camera_policy: str | None = typer.Option(
        None,
        "--camera-policy",
        help="Policy the knobs that change only camera images are swept with (default: the "
        "engine's camera reference policy).",
    ),
) -> None:
    """Validate a protocol file and print its hash and battery (and, with --sensitivity, how
    much each declared knob changes the reference policy's success and quality).

    Every instance (but those mapped to a Gymnasium env) must be in the task catalog of each of
    the protocol's sim engines (`embodied-eval protocol tasks` lists it)."""
    file = protocol_path(file_arg, file_opt, required=True)
    assert file is not None
    proto = load_protocol(file)
    check_instances(proto)
    if sensitivity:
        _print_sensitivity(
            proto, engine, instances_per_family, seeds, max_steps, as_json, camera_policy
        )
        return
    if as_json:
        print_json({"protocol_hash": proto.protocol_hash, "protocol": proto.canonical()})
        return
    console.print(f"[bold]{proto.name}[/] v{proto.version}  window {proto.window_id}")
    console.print(f"protocol_hash {proto.protocol_hash}")
    for family, insts in proto.families.items():
        console.print(
            f"  {family}: {len(insts)} instances, q* = "
            f"{', '.join(sorted({f'{i.target_quality:g}' for i in insts}))}"
        )


@protocol_app.command("tasks")
def protocol_tasks(
    engine: list[str] = typer.Option(
        [], "--engine", help="Only this sim engine's catalog (repeatable; default: every engine)."
    ),
    as_json: bool = JsonOption,
) -> None:
    """List the task ids a protocol may name: each family, its instances and the engines that
    run them."""
    unknown = [e for e in engine if e not in SIM_ENGINES]
    if unknown:
        raise EvalError(
            f"--engine {unknown[0]!r} is not a registered sim engine (known: "
            f"{', '.join(sorted(SIM_ENGINES))})",
            key="engine",
        )
    listing = catalog_listing(engine or None)
    if as_json:
        print_json({"families": listing})
        return
    if not listing:
        console.print("no sim engine registers a task catalog")
        return
    for entry in listing:
        typer.echo(f"{entry['family']}  (engines: {', '.join(entry['engines'])})")
        for task_id in entry["instances"]:
            typer.echo(f"  {task_id}")


def _print_sensitivity(
    proto: Protocol,
    engines: list[str],
    instances_per_family: int,
    seeds: int,
    max_steps: int | None,
    as_json: bool,
    camera_policy: str | None = None,
) -> None:
    result = run_sweep(
        proto,
        engines=engines or None,
        instances_per_family=instances_per_family,
        seeds=seeds,
        max_steps=max_steps,
        camera_policy=camera_policy,
    )
    if as_json:
        print_json(
            {
                "protocol_hash": proto.protocol_hash,
                "effects": [
                    {
                        "engine": e.engine,
                        "knob": e.knob,
                        "setting": e.setting,
                        "n": e.n,
                        "success_nominal": e.success_nominal,
                        "success_perturbed": e.success_perturbed,
                        "success_change": e.success_change.to_json(),
                        "quality_change": e.quality_change.to_json(),
                        "changed_pairs": e.changed_pairs,
                        "inert": e.inert,
                        "policy": e.policy,
                        "camera_knob": e.camera,
                    }
                    for e in result.effects
                ],
                "reference_success": [
                    {"engine": eng, "family": fam, "successes": w, "n": n}
                    for (eng, fam), (w, n) in sorted(result.reference_success.items())
                ],
                "warnings": list(result.warnings),
            }
        )
        return
    console.print(f"protocol_hash {proto.protocol_hash}")
    for line in sweep_table(result):
        typer.echo(line)


def register(app: typer.Typer) -> None:
    app.command("import")(import_file)
    app.command("export")(export_file)
    app.add_typer(protocol_app, name="protocol")
