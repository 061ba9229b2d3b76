"""``config/*`` params and results, and the table of known keys."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ..core.common import Params, Phase2Model

# key → (python types accepted, default, description). None is always accepted: it resets to the default.
KNOWN_KEYS: dict[str, tuple[tuple[type, ...], Any, str]] = {
    "llm.defaultProvider": ((str,), None, "provider_id used by chat/* and agent runs when none is given"),
    "llm.fallbackProvider": ((str,), None, "provider_id to fail over to after retries fail (IR 故障转移)"),
    "llm.fallbackModel": ((str,), None, "model of the fallback provider (default: its default_model)"),
    "llm.maxRetries": ((int,), 3, "retries of a retryable provider error before failing over (0-5)"),
    "agent.workspaceRoots": (
        (list,),
        [],
        "absolute folders the agent's file tools may read and write (nothing outside them; empty: no file access)",
    ),
    "app.locale": (
        (str,),
        None,
        "the app's BCP 47 locale (e.g. zh-CN, zh-TW): Chinese transcripts are in traditional characters for zh-TW,"
        " zh-HK, zh-MO, zh-Hant, else simplified (a request's own locale wins)",
    ),
    "agent.maxIterations": ((int,), 20, "ReAct iterations of a run when agent/runs/create gives none (1-200)"),
    "agent.permissionTimeoutMs": (
        (int,),
        300_000,
        "how long a run waits for agent/permissions/resolve before treating the request as denied (1000-86400000)",
    ),
    "agent.traceRetentionDays": (
        (int,),
        90,
        "finished runs' trace events older than this are removed at start (run records stay); 0 keeps them forever",
    ),
}
SECRET_KEYS: dict[str, str] = {
    "llm.fallbackApiKey": "API key used with the fallback provider instead of its own (write-only, encrypted)",
}
INT_RANGES: dict[str, tuple[int, int]] = {
    "llm.maxRetries": (0, 5),
    "agent.maxIterations": (1, 200),
    "agent.permissionTimeoutMs": (1000, 86_400_000),
    "agent.traceRetentionDays": (0, 36_500),
}


class SecretState(Phase2Model):
    configured: bool


class ConfigGetParams(Params):
    keys: list[str] | None = Field(None, description="only these keys (default: all known keys)")


class ConfigResult(Phase2Model):
    values: dict[str, Any]
    """Every requested non-secret key with its current value (the default when unset)."""
    secrets: dict[str, SecretState]
    """Secret keys: only whether they are set; a value is never returned."""


class ConfigUpdateParams(Params):
    values: dict[str, Any] = Field(description="key → new value; null resets a key to its default")


class SecretSetParams(Params):
    key: str
    value: str = Field(min_length=1)


class SecretDeleteParams(Params):
    key: str


class SecretResult(Phase2Model):
    key: str
    configured: bool
