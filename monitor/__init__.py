"""tidegauge's daemon and core: model, config, storage, scheduling, notifications, engine, CLI."""

__version__ = "0.1.0"
