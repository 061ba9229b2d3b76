"""Wire types of ``memory/*``.

The memory itself is the IR's MetonaMemoryItem, camelCase and untouched (``relevanceScore`` only in search
results). What the IR does not define — status, supersession and merge provenance, score details — sits beside
it in a snake_case envelope (phase-2 rules, ARCHITECTURE.md §3): ``{"item": MetonaMemoryItem, "status",
"superseded_by", ...}``. A context builder passes ``item`` on as is.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sidecar.core.common import PageParams, Params, Phase2Model
from sidecar.ir.memory import MetonaMemoryItem, MetonaMemorySource, MetonaMemoryType

from .supersede import SupersedeReason

MemoryStatus = Literal["active", "superseded", "expired"]

MAX_CONTENT_CHARS = 20_000
MAX_ID_CHARS = 256
MAX_EPOCH_MS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z: the latest expiry (and the longest TTL) accepted; now + TTL stays far inside int64."""


class MemoryRecord(Phase2Model):
    """One stored memory with its lifecycle and provenance."""

    item: MetonaMemoryItem
    status: MemoryStatus = Field(
        description="active; superseded (a newer memory corrected it: kept for audit, hidden by default); "
        "expired (expiresAt has passed: hidden by default, working memory is removed by memory/compact)."
    )
    superseded_by: str | None = Field(description="The id of the memory that corrected this one.")
    superseded_at: str | None = Field(description="When it was superseded (UTC ISO 8601).")
    supersedes: list[str] = Field(description="Ids of the memories this one corrected (they may since be deleted).")
    merged_from: list[str] = Field(
        description="Ids of near-duplicates memory/compact merged into this one (they no longer exist)."
    )


class ScoreDetails(Phase2Model):
    """Why a search hit ranks where it does: ``score = similarity × (0.6 + 0.25·importance + 0.15·recency)``."""

    similarity: float = Field(description="Cosine similarity of query and memory, clipped to [0, 1].")
    importance: float
    recency: float = Field(description="0.5 ** (age / 30 days), in (0, 1].")
    score: float = Field(description="The rank score; equals item.relevanceScore.")


class MemoryHit(MemoryRecord):
    score_details: ScoreDetails


class SupersededInfo(Phase2Model):
    memory_id: str
    reason: SupersedeReason = Field(
        description="explicit (the caller's supersedes), correction (a correction cue and the most similar memory), "
        "changed_value (the same statement with another value), negation (the same statement negated)."
    )
    similarity: float | None = Field(description="Cosine similarity to the new memory (null for explicit).")


# -- params -----------------------------------------------------------------------------------------------------


class MemoryAddParams(Params):
    content: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)
    type: MetonaMemoryType
    summary: str | None = Field(None, max_length=MAX_CONTENT_CHARS)
    source: MetonaMemorySource = "user_input"
    importance: float = Field(0.5, ge=0, le=1)
    session_id: str | None = Field(None, min_length=1, max_length=MAX_ID_CHARS)
    expires_at: int | None = Field(None, ge=0, le=MAX_EPOCH_MS, description="Unix ms (IR expiresAt). Not with ttl_ms.")
    ttl_ms: int | None = Field(
        None,
        gt=0,
        le=MAX_EPOCH_MS,
        description="Expire this long after now. Working memory defaults to 24 h when neither is given.",
    )
    supersedes: list[str] | None = Field(
        None,
        max_length=100,
        description="Ids this memory corrects. When given, automatic detection is skipped.",
    )
    auto_supersede: bool = Field(True, description="Detect corrected memories automatically (see ipc_schema/README).")

    @model_validator(mode="after")
    def _one_expiry(self) -> MemoryAddParams:
        if self.expires_at is not None and self.ttl_ms is not None:
            raise ValueError("give expires_at or ttl_ms, not both")
        return self


class MemoryAddResult(Phase2Model):
    memory: MemoryRecord
    superseded: list[SupersededInfo] = Field(description="The memories the new one superseded, most similar first.")


class MemoryIdParams(Params):
    memory_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)


class _Filters(Params):
    types: list[MetonaMemoryType] | None = Field(None, min_length=1, description="Only these types.")
    session_id: str | None = Field(None, min_length=1, max_length=MAX_ID_CHARS, description="Only this session...")
    include_global: bool = Field(True, description="...and, with session_id, also memories without a session.")
    include_superseded: bool = False


class MemorySearchParams(_Filters):
    query: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)
    top_k: int = Field(10, ge=1, le=100)
    min_similarity: float = Field(0.0, ge=0, le=1, description="Drop hits less similar than this.")


class MemorySearchResult(Phase2Model):
    items: list[MemoryHit]


class MemoryListParams(_Filters, PageParams):
    include_expired: bool = False


class MemoryDeleteParams(MemoryIdParams):
    restore_superseded: bool = Field(
        False, description="Make the memories this one had superseded active again (undo a wrong correction)."
    )


class MemoryDeleteResult(Phase2Model):
    memory_id: str
    deleted: bool = True
    restored: list[str] = Field(description="Ids made active again (restore_superseded).")


class MemoryCompactParams(Params):
    session_id: str | None = Field(None, min_length=1, max_length=MAX_ID_CHARS, description="Only this session.")
    duplicate_threshold: float = Field(0.95, ge=0.8, le=1, description="Cosine similarity for near-duplicates.")
    dry_run: bool = False


class MergedInfo(Phase2Model):
    memory_id: str = Field(description="The surviving memory (the most recent of its group).")
    merged_from: list[str] = Field(description="The ids merged into it and removed.")


class MemoryCompactResult(Phase2Model):
    expired_removed: list[str]
    merged: list[MergedInfo]
    remaining: int
    dry_run: bool
