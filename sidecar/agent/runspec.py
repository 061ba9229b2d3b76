"""What one agent run is set up with (:class:`RunSpec`) and counts as it goes (:class:`Counters`)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sidecar.ir import MetonaMemoryItem, MetonaRequest, MetonaToolDef

MemorySource = Callable[[str, str, int], Awaitable[list[MetonaMemoryItem]]]
LineSink = Callable[[bytes], Awaitable[None]]
Notify = Callable[[str, Any], Awaitable[None]]


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class RunSpec:
    run_id: str
    session_id: str
    provider_id: str
    model: str
    request: MetonaRequest
    max_iterations: int
    tools: list[MetonaToolDef]
    token_budget: int | None
    context_window: int
    permission_timeout_s: float
    workspace_roots: Sequence[str] = ()
    stream: LineSink | None = None
    notify: Notify | None = None


@dataclass
class Counters:
    model_calls: int = 0
    tool_calls: int = 0
    tokens: int = 0
    errors: int = 0
    invalid_tool_calls: int = 0
    failures: dict[tuple[str, str, str], int] = field(default_factory=dict)
    """(tool, arguments, error) → how often that call failed that way (the futile-loop detector)."""
