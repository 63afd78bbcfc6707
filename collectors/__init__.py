"""Collectors: each turns one engine's shapes into :class:`monitor.model.Sample` records."""
