"""``memory_search`` and ``knowledge_search``: the agent's read access to long-term memory and the notes index.

Both use the domain services handed over in ``ToolContext.services``; without the service the tool is reported
unavailable (never faked with an empty answer).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from sidecar.core.errors import SidecarError
from sidecar.ir import MetonaRiskLevel, MetonaToolCategory

from .base import Tool, ToolContext, ToolError, ToolOutput, ToolParams

CITATION_TEXT_CHARS = 300
SUMMARY_EXCERPT_CHARS = 1_200


def _service(ctx: ToolContext, attr: str) -> Any:
    return getattr(ctx.services, attr, None) if ctx.services is not None else None


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class MemorySearchParams(ToolParams):
    query: str = Field(min_length=1, max_length=2000, description="What to recall.")
    limit: int = Field(5, ge=1, le=20, description="Most memories.")


class MemorySearch(Tool):
    name = "memory_search"
    description = (
        "Search long-term memory (facts, preferences, events from earlier conversations) for items relevant to a query."
    )
    Params = MemorySearchParams
    category = MetonaToolCategory.SEARCH
    risk_level = MetonaRiskLevel.SAFE
    timeout_ms = 15_000

    def unavailable_reason(self, ctx: ToolContext) -> str | None:
        return None if _service(ctx, "memory") is not None else "the memory service is not available"

    async def run(self, args: MemorySearchParams, ctx: ToolContext) -> ToolOutput:
        memory = _service(ctx, "memory")
        try:
            items = await memory.relevant_memories(args.query, ctx.session_id, args.limit)
        except SidecarError as exc:
            raise ToolError(exc.message, exc.code) from None
        dumped = [item.model_dump(mode="json") for item in items]
        if not items:
            return ToolOutput(result=dumped, summary=f"No memories relevant to {args.query!r}.")
        lines = [f"{len(items)} memories relevant to {args.query!r}:"]
        for i, item in enumerate(items, start=1):
            score = f", relevance {item.relevance_score:.2f}" if item.relevance_score is not None else ""
            lines.append(f"{i}. [{item.type}{score}] {_clip(item.content, SUMMARY_EXCERPT_CHARS)}")
        return ToolOutput(result=dumped, summary="\n".join(lines))


class KnowledgeSearchParams(ToolParams):
    query: str = Field(min_length=1, max_length=4000, description="What to look for.")
    mode: Literal["hybrid", "fts", "vector"] = Field(
        "hybrid", description="hybrid (best), fts (keywords) or vector (meaning)."
    )
    top_k: int = Field(5, ge=1, le=20, description="Most passages.")


class KnowledgeSearch(Tool):
    name = "knowledge_search"
    description = (
        "Search the user's notes for passages relevant to a query; returns passages with note titles and ids to cite."
    )
    Params = KnowledgeSearchParams
    category = MetonaToolCategory.SEARCH
    risk_level = MetonaRiskLevel.SAFE
    timeout_ms = 30_000
    examples = ("我的笔记里关于季度预算写了什么？",)

    def unavailable_reason(self, ctx: ToolContext) -> str | None:
        return None if _service(ctx, "retrieval") is not None else "the knowledge search service is not available"

    async def run(self, args: KnowledgeSearchParams, ctx: ToolContext) -> ToolOutput:
        retrieval = _service(ctx, "retrieval")
        try:
            found = await retrieval.search(args.query, mode=args.mode, top_k=args.top_k)
        except SidecarError as exc:
            raise ToolError(exc.message, exc.code) from None
        hits = list(found.items)
        citations = [_citation(hit) for hit in hits]
        return ToolOutput(result=found.model_dump(mode="json"), summary=_summary(args, hits), citations=citations)


def _citation(hit: Any) -> dict[str, Any]:
    cited: dict[str, Any] = {
        "note_id": hit.note_id,
        "note_title": hit.note_title,
        "block_id": hit.block_id,
        "score": hit.score,
        "text": hit.text[:CITATION_TEXT_CHARS],
    }
    if hit.citations:
        cited["citations"] = [c.model_dump(mode="json", exclude_none=True) for c in hit.citations]
    return cited


def _summary(args: KnowledgeSearchParams, hits: list[Any]) -> str:
    if not hits:
        return f"No passages in the notes match {args.query!r} ({args.mode} search)."
    parts = [f"{len(hits)} passages for {args.query!r} ({args.mode} search):"]
    for i, hit in enumerate(hits, start=1):
        parts.append(
            f"\n[{i}] {hit.note_title} (note {hit.note_id}, block {hit.block_id}{_source(hit)}, score {hit.score:.3f})\n"
            f"{_clip(hit.text, SUMMARY_EXCERPT_CHARS)}"
        )
    return "\n".join(parts)


def _source(hit: Any) -> str:
    """Where an imported document's passage is: ``, page 7`` (and its heading path), so an answer can cite it."""
    for c in hit.citations or []:
        if c.page is not None:
            return f", page {c.page}" + (f", {c.label}" if c.label else "")
        if c.attachment_id and c.label:
            return f", {c.label}"
    return ""
