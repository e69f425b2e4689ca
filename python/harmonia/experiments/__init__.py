"""Experiments that run several scenarios and compare them with the papers."""
