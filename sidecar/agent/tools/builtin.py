"""The nine built-in tools, ``get_current_time``, and a registry holding all of them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field

from sidecar.ir import MetonaRiskLevel, MetonaToolCategory

from .base import Tool, ToolContext, ToolError, ToolOutput, ToolParams
from .calculator import Calculator
from .files import ListDirectory, ReadFile, SearchFiles, WriteFile
from .knowledge import KnowledgeSearch, MemorySearch
from .registry import ToolRegistry
from .web import HttpGet

if TYPE_CHECKING:  # not imported at run time: these pull in LanceDB and numpy
    from sidecar.memory.service import MemoryService
    from sidecar.retrieval.service import RetrievalService


@dataclass
class ToolServices:
    """The domain services the built-in tools reach through ``ToolContext.services``. A ``None`` service makes
    the tools that need it unavailable (``memory_search``, ``knowledge_search``)."""

    memory: MemoryService | None = None
    retrieval: RetrievalService | None = None


class GetCurrentTimeParams(ToolParams):
    timezone: str | None = Field(
        None, min_length=1, max_length=64, description="e.g. 'Asia/Shanghai'; default: local time."
    )


class GetCurrentTime(Tool):
    name = "get_current_time"
    description = "The current date and time (ISO 8601, weekday, Unix ms), local or in an IANA time zone."
    Params = GetCurrentTimeParams
    category = MetonaToolCategory.CUSTOM
    risk_level = MetonaRiskLevel.SAFE
    timeout_ms = 5_000

    async def run(self, args: GetCurrentTimeParams, ctx: ToolContext) -> ToolOutput:
        if args.timezone is None:
            now = datetime.now().astimezone()
            zone = _local_zone_name() or now.tzname() or "local"
        else:
            zone = args.timezone.strip()
            now = datetime.now(_zone(zone))
        result = {
            "iso": now.isoformat(timespec="seconds"),
            "timezone": zone,
            "unix_ms": int(now.timestamp() * 1000),
            "weekday": now.strftime("%A"),
        }
        return ToolOutput(result=result, summary=f"{result['iso']} ({result['weekday']}, {zone})")


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ToolError(
            f"unknown time zone {name!r}; use an IANA name such as 'Europe/Paris'", "UNKNOWN_TIMEZONE"
        ) from None


def _local_zone_name() -> str | None:
    """The IANA name of the local zone when the system says it (``TZ``, ``/etc/localtime``), else None."""
    tz = os.environ.get("TZ", "").lstrip(":")
    if tz and "/" in tz and not tz.startswith("/"):
        return tz
    try:
        target = os.path.realpath("/etc/localtime")
    except OSError:
        return None
    marker = "zoneinfo/"
    return target.split(marker, 1)[1] if marker in target else None


def builtin_tools() -> list[Tool]:
    """A fresh instance of every built-in tool, in the order they are offered to the model."""
    return [
        ReadFile(),
        WriteFile(),
        ListDirectory(),
        SearchFiles(),
        Calculator(),
        GetCurrentTime(),
        HttpGet(),
        MemorySearch(),
        KnowledgeSearch(),
    ]


def default_registry() -> ToolRegistry:
    """A registry with the nine built-in tools registered."""
    registry = ToolRegistry()
    for tool in builtin_tools():
        registry.register(tool)
    return registry
