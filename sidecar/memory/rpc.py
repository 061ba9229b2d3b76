"""``memory/*`` methods (ARCHITECTURE.md §6): thin handlers over :class:`MemoryService`."""

from __future__ import annotations

from typing import Any

from sidecar.core.common import Page
from sidecar.ipc.context import RequestContext
from sidecar.ipc.router import Method

from .models import (
    MemoryAddParams,
    MemoryAddResult,
    MemoryCompactParams,
    MemoryCompactResult,
    MemoryDeleteParams,
    MemoryDeleteResult,
    MemoryIdParams,
    MemoryListParams,
    MemoryRecord,
    MemorySearchParams,
    MemorySearchResult,
)
from .service import MemoryService


def methods(service: MemoryService) -> list[Method[Any, Any]]:
    async def add(ctx: RequestContext, p: MemoryAddParams) -> MemoryAddResult:
        return await service.add(p)

    async def get(ctx: RequestContext, p: MemoryIdParams) -> MemoryRecord:
        return await service.get(p.memory_id)

    async def search(ctx: RequestContext, p: MemorySearchParams) -> MemorySearchResult:
        return await service.search(p)

    async def list_(ctx: RequestContext, p: MemoryListParams) -> Page[MemoryRecord]:
        return await service.list(p)

    async def delete(ctx: RequestContext, p: MemoryDeleteParams) -> MemoryDeleteResult:
        return await service.delete(p)

    async def compact(ctx: RequestContext, p: MemoryCompactParams) -> MemoryCompactResult:
        return await service.compact(p)

    return [
        Method(
            "memory/add",
            MemoryAddParams,
            MemoryAddResult,
            add,
            summary="Store a MetonaMemoryItem; the memories it corrects (explicit or detected) become superseded.",
        ),
        Method("memory/get", MemoryIdParams, MemoryRecord, get, summary="One memory by id, whatever its status."),
        Method(
            "memory/search",
            MemorySearchParams,
            MemorySearchResult,
            search,
            summary="Memories ranked by similarity × (0.6 + 0.25·importance + 0.15·recency); never expired ones.",
        ),
        Method(
            "memory/list",
            MemoryListParams,
            Page[MemoryRecord],
            list_,
            summary="Memories, newest first, paged (limit/offset); active only unless asked.",
        ),
        Method(
            "memory/delete",
            MemoryDeleteParams,
            MemoryDeleteResult,
            delete,
            summary="Delete one memory (optionally restoring the memories it had superseded).",
        ),
        Method(
            "memory/compact",
            MemoryCompactParams,
            MemoryCompactResult,
            compact,
            summary="Remove expired working memory and merge near-duplicates (provenance kept in merged_from).",
        ),
    ]
