"""`embodied-eval trial audit`: the window's judge audit (draw, label, plan) and a single
episode's technician audit."""

from __future__ import annotations

import secrets
from pathlib import Path

import typer

from embodied_eval.cli.common import DbOption, JsonOption, console, print_json
from embodied_eval.cli.store_cmd import PassOption, trial_audit
from embodied_eval.errors import EvalError


def _window_success_rate(db: Path | None, window: str) -> float:
    from embodied_eval.embodiment.window_audit import verdict_of
    from embodied_eval.store.core import Store, default_db_path

    with Store(db if db is not None else default_db_path(), create=False) as store:
        episodes = store.scored_episodes(window=window, side="real").episodes
    verdicts = [v for v in map(verdict_of, episodes) if v in ("success", "failure")]
    if not verdicts:
        raise EvalError(f"window {window!r}: no judged real episode", key="window")
    return verdicts.count("success") / len(verdicts)


def _cell(est: dict[str, object]) -> str:
    """`0.800 [0.284, 0.995] n=5` (Clopper–Pearson), or `— n=0`."""
    if est.get("value") is None:
        return f"— n={est.get('n')}"
    return f"{est['value']:.3f} [{est['low']:.3f}, {est['high']:.3f}] n={est['n']}"


def trial_window_audit(
    episode_id: str | None = typer.Argument(
        None, help="With --succeeded: the stored episode a technician audits (signed)."
    ),
    window: str | None = typer.Option(
        None, "--window", help="The window audited (default with --label: the last drawn)."
    ),
    seed: int | None = typer.Option(
        None, "--seed", help="Seed of the draw (default: a fresh one; recorded either way)."
    ),
    per_stratum: int = typer.Option(
        5, "--per-stratum", help="Judged episodes drawn per family × verdict stratum."
    ),
    label: tuple[str, str] | None = typer.Option(
        None,
        "--label",
        help="EPISODE_ID success|failure|cannot_tell: what the recording shows.",
    ),
    by: str = typer.Option("", "--by", help="Who labelled the recording (with --label)."),
    measure: bool = typer.Option(
        False, "--measure", help="Record Se and Sp per family from the window's labels."
    ),
    width: float | None = typer.Option(
        None, "--width", help="Plan: audits for Se/Sp exact intervals of this width."
    ),
    accuracy: float = typer.Option(
        0.9, "--accuracy", help="Plan: the Se and Sp expected (0.5 is the widest case)."
    ),
    rate: float | None = typer.Option(
        None, "--rate", help="Plan: the success rate (default: the window's judged rate)."
    ),
    key: Path | None = typer.Option(None, "--key", help="Private key (PEM) to sign with."),
    succeeded: str | None = typer.Option(
        None, "--succeeded", help="With EPISODE_ID: did the task truly succeed (yes/no)."
    ),
    quality: float | None = typer.Option(None, "--quality", help="With --succeeded."),
    note: str = typer.Option("", "--note", help="What you checked."),
    passphrase_env: str | None = PassOption,
    db: Path | None = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Audit the judge on a window's own episodes.

    `--window W [--seed S] [--per-stratum N]` draws a stratified random sample (family × the
    judge's verdict) of the window's judged real episodes, plus every one the judge could not
    judge, records the draw and its seed in the trial ledger and lists each episode with its
    family, verdict and recording. `--label EPISODE_ID success|failure|cannot_tell --by NAME`
    records what the recording shows (signed with --key). `--window W --measure` records Se and
    Sp per family (exact intervals) from the labels, naming the detector. `--width W` plans how many audits give
    Se and Sp exact intervals that wide. `EPISODE_ID --key K --succeeded yes|no` is a single
    technician-signed audit of a stored episode.
    """
    from embodied_eval.store.signing_keys import load_key_option

    if succeeded is not None or episode_id is not None:
        if episode_id is None or succeeded is None or key is None:
            raise EvalError("a single audit needs EPISODE_ID, --key and --succeeded yes|no")
        trial_audit(episode_id, key, succeeded, quality, note, passphrase_env, db, as_json)
        return
    if width is not None:
        from embodied_eval.embodiment.window_audit import audits_for_width

        if rate is None:
            if window is None:
                raise EvalError("--width needs --window (its success rate) or --rate", key="rate")
            rate = _window_success_rate(db, window)
        plan = audits_for_width(width, rate, accuracy)
        if as_json:
            print_json({"width": width, "success_rate": rate, "accuracy": accuracy, **plan})
            return
        console.print(
            f"{plan['audits']} audits (about {plan['per_outcome']} true successes and "
            f"{plan['per_outcome']} true failures) give Se and Sp 95 % Clopper–Pearson intervals "
            f"no wider than {width:g} at success rate {rate:.3f} and accuracy {accuracy:g}",
            markup=False,
            highlight=False,
        )
        return
    if label is not None:
        from embodied_eval.embodiment.audit_sample import label_episode, latest_draw_window

        private = load_key_option(key, passphrase_env) if key is not None else None
        target = window if window is not None else latest_draw_window(db)
        payload = label_episode(db, target, label[0], label[1], by, private, note)
        if as_json:
            print_json(payload)
            return
        signed = f", signed by {str(payload['signer'])[:16]}…" if payload["signer"] else ""
        console.print(
            f"label {payload['record_id']}: {label[0]} is {label[1]} (judge said "
            f"{payload['verdict']}), by {payload['by']}, chained at {payload['seq']}{signed}",
            markup=False,
            highlight=False,
        )
        return
    if window is None:
        raise EvalError(
            "trial audit: give --window W to draw, --label EPISODE_ID LABEL --by NAME, "
            "--window W --measure, or --width W",
            key="window",
        )
    if measure:
        from embodied_eval.embodiment.audit_sample import measure_window_audit

        private = load_key_option(key, passphrase_env) if key is not None else None
        measured = measure_window_audit(db, window, key=private)
        if as_json:
            print_json(measured)
            return
        det = measured["detector"]
        console.print(
            f"judge accuracy {measured['record_id']} of window {window!r} "
            f"({det.get('name')} {det.get('version')}, code {str(det.get('code_hash'))[:12]}…; "
            f"{len(measured['labels'])} label(s), chained at {measured['seq']}):",
            markup=False,
            highlight=False,
        )
        for stratum, row in measured["accuracy"].items():
            console.print(
                f"  {stratum:<12} sensitivity {_cell(row['sensitivity'])}  "
                f"specificity {_cell(row['specificity'])}",
                markup=False,
                highlight=False,
            )
        return
    from embodied_eval.embodiment.audit_sample import draw_window_audit
    from embodied_eval.embodiment.window_audit import recording_of, verdict_of

    used_seed = seed if seed is not None else secrets.randbits(32)
    draw, record, sample = draw_window_audit(db, window, used_seed, per_stratum)
    if as_json:
        print_json(record)
        return
    console.print(
        f"audit sample {record['record_id']} of window {window!r}: seed {draw.seed}, "
        f"{len(sample)} episode(s) (chained at {record['seq']})",
        markup=False,
        highlight=False,
    )
    for e in sample:
        console.print(
            f"  {e.episode_id}  {e.family}  judge: {verdict_of(e)}  recording: {recording_of(e)}",
            markup=False,
            highlight=False,
        )
    console.print(
        "label each: embodied-eval trial audit --label EPISODE_ID success|failure|cannot_tell "
        "--by NAME",
        markup=False,
        highlight=False,
    )
