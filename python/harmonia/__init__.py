"""Harmonia front end: scenario validation, simulation runs and reports."""
