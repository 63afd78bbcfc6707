"""The ``rules:`` section of the configuration: parameters by rule name plus per-job overrides.

Each rule validates its own parameters (:mod:`rules.params`, through :func:`rules.registry.validate`);
this module only gives the section its shape, so ``rules`` owns its configuration and the daemon's
config (:mod:`monitor.config`) embeds it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["RuleOverride", "RulesConfig"]


class RuleOverride(BaseModel):
    """Per-job parameter overrides: ``match`` on ``job_id``/``job_name``/``engine``, then ``rule``'s
    ``params`` merged over the rule's base parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    match: dict[str, str]
    rule: str
    params: dict[str, Any]


class RulesConfig(BaseModel):
    """Rule parameters by rule name (free-form here; each rule validates its own) plus overrides."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)
    overrides: list[RuleOverride] = Field(default_factory=list)
