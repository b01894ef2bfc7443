"""`embodied-eval incidents ...` and `embodied-eval keys ...`: the safety officer's commands.

Every command takes `--db`. User errors raise `EvalError` (one line, exit 2); `incidents verify`
exits 1 when the log does not verify. The commands live in `cli_report` (report, list, show),
`cli_review` (amend, review, close-window, verify, rates) and `cli_ledger` (import, export,
ingest, exposure, keys); this module builds the typer apps.
"""

from __future__ import annotations

import typer

from incident_logging import cli_ledger, cli_report, cli_review

incidents_app = typer.Typer(
    help="Incident log: report, review, amend, verify, rates per 100 h.", no_args_is_help=True
)
exposure_app = typer.Typer(help="Exposure-hours ledger of the real robot.", no_args_is_help=True)
keys_app = typer.Typer(
    help="Ed25519 signing keys for reviews and window closes.", no_args_is_help=True
)

incidents_app.command("report")(cli_report.report)
incidents_app.command("list")(cli_report.list_incidents)
incidents_app.command("show")(cli_report.show)
incidents_app.command("amend")(cli_review.amend)
incidents_app.command("review")(cli_review.review)
incidents_app.command("close-window")(cli_review.close_window)
incidents_app.command("verify")(cli_review.verify)
incidents_app.command("rates")(cli_review.rates)
incidents_app.command("import")(cli_ledger.import_cmd)
incidents_app.command("export")(cli_ledger.export_cmd)
incidents_app.command("ingest")(cli_ledger.ingest)
exposure_app.command("add")(cli_ledger.exposure_add)
exposure_app.command("list")(cli_ledger.exposure_list)
exposure_app.command("amend")(cli_ledger.exposure_amend)
keys_app.command("create")(cli_ledger.keys_create)
keys_app.command("list")(cli_ledger.keys_list)
keys_app.command("revoke")(cli_ledger.keys_revoke)
incidents_app.add_typer(exposure_app, name="exposure")
