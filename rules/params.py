"""Parameter schemas shared by the rules: a pydantic base model and the ``10m``-style duration type.

Every rule declares its parameters as a subclass of :class:`RuleParams` (unknown keys are rejected).
:func:`parse_params` validates one rule's mapping from the ``rules:`` section of the config and turns
pydantic's errors into :class:`monitor.errors.ConfigError` naming ``rules.<rule>.<param>``.

Keys every rule accepts:

* ``enabled`` (default true);
* ``severity``: replaces the severity of every finding of the rule (``info``/``warning``/``critical``);
* ``for``: how long the condition must hold. Rules whose condition is a duration measured on the sample
  history (``watermark_stall``, ``idle_source``, ``falling_behind``) consume it themselves — their findings
  are already true for ``for`` — and the alert lifecycle then fires at once; for the other rules it is the
  alert lifecycle's pending time (Prometheus ``for``). :func:`rules.registry.rule_timing` gives the daemon
  the lifecycle timing that results;
* ``keep_firing_for``: the alert lifecycle's Prometheus ``keep_firing_for``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from monitor.durations import parse_duration_ms
from monitor.errors import ConfigError
from monitor.model import Severity

__all__ = ["Duration", "RuleParams", "parse_params"]


def _duration(value: Any) -> Any:
    if isinstance(value, timedelta):
        return value
    if isinstance(value, str):
        return timedelta(milliseconds=parse_duration_ms(value, what="duration"))
    if isinstance(value, int | float):
        raise ValueError(f"expected a duration with a unit (e.g. {value}s, 10m, 1h), got a bare number")
    raise ValueError("expected a duration like 30s, 10m, 1h")


Duration = Annotated[timedelta, BeforeValidator(_duration)]
"""A duration written ``30s``/``10m``/``1h`` in YAML, held as a :class:`datetime.timedelta`."""


class RuleParams(BaseModel):
    """Keys common to every rule (see the module docstring); subclasses add the rule's own."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    enabled: bool = True
    severity: Literal["info", "warning", "critical"] | None = None
    for_: Duration | None = Field(None, alias="for")
    keep_firing_for: Duration = timedelta(0)

    def history_needed(self) -> tuple[timedelta, timedelta]:
        """How much history the rule reads before the job's newest sample: (job-scope batches, per-scope
        series). The registry keeps the longest over the enabled rules (see :func:`rules.history.job_history`)."""
        return timedelta(0), timedelta(0)

    def severity_override(self) -> Severity | None:
        """The configured ``severity`` as a :class:`Severity`, or ``None``."""
        return None if self.severity is None else Severity.parse(self.severity)


P = TypeVar("P", bound=RuleParams)


def _param_path(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc if not str(part).startswith("function-"))


def parse_params(model: type[P], data: Any, where: str) -> P:
    """Validate ``data`` (a mapping, or ``None`` for all defaults) against ``model``.

    Args:
        model: the rule's parameter class.
        data: the mapping from the config.
        where: the config path of the mapping, e.g. ``"rules.watermark_stall"``.

    Raises:
        ConfigError: ``"<where>.<param>: <what is wrong>"``, one line per error.
    """
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping of parameters, got {type(data).__name__}")
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        lines: list[str] = []
        for err in exc.errors(include_url=False, include_input=False):
            path = _param_path(err["loc"])
            target = f"{where}.{path}" if path else where
            msg = "unknown parameter" if err["type"] == "extra_forbidden" else err["msg"]
            if msg.startswith("Value error, "):
                msg = msg[len("Value error, ") :]
            line = f"{target}: {msg}"
            if line not in lines:
                lines.append(line)
        raise ConfigError("\n".join(lines)) from None
