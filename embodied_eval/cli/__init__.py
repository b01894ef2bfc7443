"""The `embodied-eval` command line (typer + rich)."""
