"""`python -m harmonia` runs the command line."""

from harmonia.cli.main import app

app()
