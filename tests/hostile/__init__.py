"""Hostile endpoints and files (issue 19): each case runs a real ``tidegauge`` command in a subprocess."""
