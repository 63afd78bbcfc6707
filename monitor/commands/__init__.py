"""CLI sub-commands, one module each; :mod:`monitor.cli` registers them."""
