"""The memory store: MetonaMemoryItem in LanceDB, ranked search, supersession, compaction.

Knows nothing of JSON-RPC. Every LanceDB call and every embedding runs in a worker thread; table operations are
serialised by one :class:`anyio.Lock` (an ``add`` reads its candidates and writes its commit without another write
in between). The table is opened on first use, so ``lancedb`` is not imported while the sidecar starts.

Ranking (``search``, ``relevant_memories``)::

    similarity = max(0, cosine(query, memory))                  # exact k-NN over the prefiltered rows
    recency    = 0.5 ** (age / 30 days)
    score      = similarity × (0.6 + 0.25·importance + 0.15·recency)   # = item.relevanceScore

Relevance dominates by construction: importance and recency scale a memory's similarity by at most 1/0.6, so an
important or fresh memory never outranks one that is about the query when it is not. The candidates are the
``max(5·top_k, 50)`` most similar rows that pass the filters; expired memories never pass, superseded ones only
with ``include_superseded``.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import numpy as np

from sidecar.core.common import Page, PageInfo, iso
from sidecar.core.errors import BadRequestError, NotFoundError
from sidecar.embeddings import Embedder
from sidecar.ir.memory import MetonaMemoryItem, MetonaMemoryType
from sidecar.storage.lancedb import LANCEDB_DIRNAME

from . import supersede
from .models import (
    MemoryAddParams,
    MemoryAddResult,
    MemoryCompactParams,
    MemoryCompactResult,
    MemoryDeleteParams,
    MemoryDeleteResult,
    MemoryHit,
    MemoryListParams,
    MemoryRecord,
    MemorySearchParams,
    MemorySearchResult,
    MemoryStatus,
    MergedInfo,
    ScoreDetails,
    SupersededInfo,
)
from .store import TABLE, MemoryTable, Row, id_list, quote

logger = logging.getLogger(__name__)

T = TypeVar("T")

MEMORY_NOT_FOUND = "MEMORY_NOT_FOUND"
"""An unknown memory id (the not-found rule of ipc_schema/README.md)."""


def _not_found(memory_id: str) -> NotFoundError:
    return NotFoundError("No memory with this id.", code=MEMORY_NOT_FOUND, details={"memory_id": memory_id})


DAY_MS = 86_400_000
WORKING_DEFAULT_TTL_MS = DAY_MS
RECENCY_HALF_LIFE_MS = 30 * DAY_MS
W_BASE, W_IMPORTANCE, W_RECENCY = 0.6, 0.25, 0.15
RELEVANCE_FLOOR = 0.25
"""``relevant_memories`` drops hits less similar than this (USE: unrelated sentences score ~0.0–0.2)."""
SUPERSEDE_CANDIDATES = 8
OPTIMIZE_EVERY = 50
"""Compact the table's files after this many commits: every write adds a fragment, and a scan over 1,000 one-row
fragments is ~10x slower than over one (measured: search p50 163 ms → 13 ms at 1,000 memories)."""
COMPACT_BLOCK = 512


def epoch_ms() -> int:
    return int(time.time() * 1000)


def new_memory_id() -> str:
    return f"mem_{uuid.uuid4().hex}"


def _iso_ms(ms: int | None) -> str | None:
    return None if ms is None else iso(datetime.fromtimestamp(ms / 1000, UTC))


class MemoryService:
    def __init__(
        self,
        data_dir: str | Path,
        embedder: Embedder | Callable[[], Embedder],
        *,
        clock: Callable[[], int] = epoch_ms,
        new_id: Callable[[], str] = new_memory_id,
    ) -> None:
        """``embedder`` may be a factory: it is then called on first use (the default model loads lazily)."""
        self._data_dir = Path(data_dir)
        self._embedder_source = embedder
        self._embedder: Embedder | None = None
        self._clock = clock
        self._new_id = new_id
        self._lock = anyio.Lock()
        self._table: MemoryTable | None = None
        self._writes_since_optimize = 0

    # -- plumbing -------------------------------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            source = self._embedder_source
            self._embedder = source() if callable(source) else source
        return self._embedder

    async def _embed(self, texts: Sequence[str]) -> np.ndarray:
        return await anyio.to_thread.run_sync(self.embedder.embed, list(texts))

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking table call in a worker thread (caller holds ``self._lock``)."""
        return await anyio.to_thread.run_sync(fn, *args)

    async def _open(self) -> MemoryTable:
        if self._table is None:
            embedder = self.embedder
            info = embedder.info
            key = f"{info.model_id}@{info.model_version}"

            def work() -> MemoryTable:
                from sidecar.storage.lancedb import connect

                return MemoryTable.open(connect(self._data_dir), info.dimension, key, embedder.embed)

            self._table = await self._run(work)
        return self._table

    async def _committed(self, table: MemoryTable, *, optimize: bool = False) -> None:
        """Count a commit; compact the table's files every :data:`OPTIMIZE_EVERY` commits (caller holds the lock)."""
        self._writes_since_optimize += 1
        if optimize or self._writes_since_optimize >= OPTIMIZE_EVERY:
            self._writes_since_optimize = 0
            try:
                await self._run(table.optimize)
            except Exception:  # maintenance only: the data is already committed
                logger.exception("optimizing the memories table failed")

    def _table_on_disk(self) -> bool:
        return (Path(self._data_dir) / LANCEDB_DIRNAME / f"{TABLE}.lance").exists()

    @property
    def _model_key(self) -> str:
        info = self.embedder.info
        return f"{info.model_id}@{info.model_version}"

    def _record(self, row: Row, now: int, score: float | None = None) -> MemoryRecord:
        status: MemoryStatus = "active"
        if row["superseded_by"] is not None:
            status = "superseded"
        elif row["expires_at"] is not None and row["expires_at"] <= now:
            status = "expired"
        item = MetonaMemoryItem(
            id=row["id"],
            type=row["type"],
            content=row["content"],
            summary=row["summary"],
            source=row["source"],
            importance=row["importance"],
            relevance_score=score,
            session_id=row["session_id"],
            created_at=row["created_at"],
            expires_at=row["expires_at"],
        )
        return MemoryRecord(
            item=item,
            status=status,
            superseded_by=row["superseded_by"],
            superseded_at=_iso_ms(row["superseded_at"]),
            supersedes=list(row["supersedes"] or []),
            merged_from=list(row["merged_from"] or []),
        )

    @staticmethod
    def _where(
        now: int,
        *,
        types: Iterable[str] | None = None,
        session_id: str | None = None,
        include_global: bool = True,
        same_session: bool = False,
        include_superseded: bool = False,
        include_expired: bool = False,
    ) -> str | None:
        parts: list[str] = []
        if types:
            parts.append(f"type IN {id_list(types)}")
        if same_session:  # exactly this session, or exactly no session
            parts.append("session_id IS NULL" if session_id is None else f"session_id = {quote(session_id)}")
        elif session_id is not None:
            own = f"session_id = {quote(session_id)}"
            parts.append(f"({own} OR session_id IS NULL)" if include_global else own)
        if not include_superseded:
            parts.append("superseded_by IS NULL")
        if not include_expired:
            parts.append(f"(expires_at IS NULL OR expires_at > {int(now)})")
        return " AND ".join(parts) or None

    # -- add ------------------------------------------------------------------------------------------------

    def _expiry(self, p: MemoryAddParams, now: int) -> int | None:
        if p.ttl_ms is not None:
            return now + p.ttl_ms
        if p.expires_at is not None:
            if p.expires_at <= now:
                raise BadRequestError(
                    "expires_at is not in the future.", code="INVALID_EXPIRY", details={"field": "expires_at"}
                )
            return p.expires_at
        return now + WORKING_DEFAULT_TTL_MS if p.type == "working" else None

    async def add(self, p: MemoryAddParams) -> MemoryAddResult:
        now = self._clock()
        expires_at = self._expiry(p, now)
        stripped = supersede.strip_cues(p.content)
        probe_stripped = p.supersedes is None and p.auto_supersede and stripped and stripped != p.content
        vectors = await self._embed([p.content, stripped] if probe_stripped else [p.content])
        row: Row = {
            "id": self._new_id(),
            "type": p.type,
            "content": p.content,
            "summary": p.summary,
            "source": p.source,
            "importance": float(p.importance),
            "session_id": p.session_id,
            "created_at": now,
            "expires_at": expires_at,
            "superseded_by": None,
            "superseded_at": None,
            "supersedes": [],
            "merged_from": [],
            "embedding_model": self._model_key,
            "vector": vectors[0].tolist(),
        }
        async with self._lock:
            table = await self._open()
            if p.supersedes is not None:
                decisions = await self._explicit(table, p.supersedes)
            elif p.auto_supersede:
                decisions = await self._detect(table, p, vectors, now)
            else:
                decisions = []
            olds = await self._run(lambda: table.get_many([d.memory_id for d in decisions], with_vectors=True))
            for old in olds:
                old["superseded_by"] = row["id"]
                old["superseded_at"] = now
            row["supersedes"] = [d.memory_id for d in decisions]
            await self._run(lambda: table.upsert([row, *olds]))
            await self._committed(table)
        if decisions:
            logger.info("memory %s supersedes %s", row["id"], row["supersedes"])
        return MemoryAddResult(
            memory=self._record(row, now),
            superseded=[
                SupersededInfo(
                    memory_id=d.memory_id,
                    reason=d.reason,
                    similarity=None if d.reason == "explicit" else round(d.similarity, 4),
                )
                for d in decisions
            ],
        )

    async def _explicit(self, table: MemoryTable, ids: list[str]) -> list[supersede.Decision]:
        wanted = list(dict.fromkeys(ids))
        found = {r["id"] for r in await self._run(lambda: table.get_many(wanted))}
        missing = [i for i in wanted if i not in found]
        if missing:
            raise NotFoundError(
                "A memory to supersede does not exist.", code=MEMORY_NOT_FOUND, details={"memory_ids": missing}
            )
        return [supersede.Decision(i, "explicit", 1.0) for i in wanted]

    async def _detect(
        self, table: MemoryTable, p: MemoryAddParams, vectors: np.ndarray, now: int
    ) -> list[supersede.Decision]:
        where = self._where(now, types=[p.type], session_id=p.session_id, same_session=True)
        best: dict[str, supersede.Candidate] = {}
        for vec in vectors:
            hits = await self._run(lambda v=vec: table.nearest(v, where, SUPERSEDE_CANDIDATES))
            for row, sim in hits:
                known = best.get(row["id"])
                if known is None or sim > known.similarity:
                    best[row["id"]] = supersede.Candidate(row["id"], row["content"], sim)
        candidates = sorted(best.values(), key=lambda c: -c.similarity)
        return supersede.decide(p.content, candidates)

    # -- read -----------------------------------------------------------------------------------------------

    async def get(self, memory_id: str) -> MemoryRecord:
        async with self._lock:
            table = await self._open()
            row = await self._run(table.get, memory_id)
        if row is None:
            raise _not_found(memory_id)
        return self._record(row, self._clock())

    async def search(self, p: MemorySearchParams) -> MemorySearchResult:
        now = self._clock()
        vector = (await self._embed([p.query]))[0]
        where = self._where(
            now,
            types=p.types,
            session_id=p.session_id,
            include_global=p.include_global,
            include_superseded=p.include_superseded,
        )
        async with self._lock:
            table = await self._open()
            hits = await self._run(table.nearest, vector, where, max(5 * p.top_k, 50))
        ranked: list[MemoryHit] = []
        for row, cosine in hits:
            similarity = min(1.0, max(0.0, cosine))
            if similarity < p.min_similarity:
                continue
            age = max(0, now - row["created_at"])
            recency = 0.5 ** (age / RECENCY_HALF_LIFE_MS)
            score = similarity * (W_BASE + W_IMPORTANCE * row["importance"] + W_RECENCY * recency)
            score = round(score, 6)
            record = self._record(row, now, score)
            details = ScoreDetails(
                similarity=round(similarity, 6), importance=row["importance"], recency=round(recency, 6), score=score
            )
            ranked.append(MemoryHit(**dict(record), score_details=details))
        ranked.sort(key=lambda h: (-h.score_details.score, -h.item.created_at, h.item.id))
        return MemorySearchResult(items=ranked[: p.top_k])

    async def relevant_memories(
        self,
        query: str,
        session_id: str | None,
        limit: int,
        *,
        types: list[MetonaMemoryType] | None = None,
        min_similarity: float = RELEVANCE_FLOOR,
    ) -> list[MetonaMemoryItem]:
        """MetonaContext.relevantMemories for the agent's context builder: active, unexpired memories of this
        session and global ones, best first, ``relevanceScore`` set. An empty query or ``limit`` < 1 gives []."""
        if not query.strip() or limit < 1:
            return []
        if self._table is None and not self._table_on_disk():
            return []  # nothing was ever remembered: no reason to load LanceDB and the embedding model
        result = await self.search(
            MemorySearchParams(
                query=query, top_k=min(limit, 100), types=types, session_id=session_id, min_similarity=min_similarity
            )
        )
        return [hit.item for hit in result.items]

    async def list(self, p: MemoryListParams) -> Page[MemoryRecord]:
        now = self._clock()
        where = self._where(
            now,
            types=p.types,
            session_id=p.session_id,
            include_global=p.include_global,
            include_superseded=p.include_superseded,
            include_expired=p.include_expired,
        )
        async with self._lock:
            table = await self._open()
            rows = await self._run(table.scan, where)
        rows.sort(key=lambda r: (r["created_at"], r["id"]), reverse=True)
        page = rows[p.offset : p.offset + p.limit]
        return Page[MemoryRecord](
            items=[self._record(r, now) for r in page], page=PageInfo(total=len(rows), limit=p.limit, offset=p.offset)
        )

    # -- delete / compact -----------------------------------------------------------------------------------

    async def delete(self, p: MemoryDeleteParams) -> MemoryDeleteResult:
        async with self._lock:
            table = await self._open()
            if await self._run(table.get, p.memory_id) is None:
                raise _not_found(p.memory_id)
            restored: list[Row] = []
            if p.restore_superseded:
                restored = await self._run(
                    lambda: table.scan(f"superseded_by = {quote(p.memory_id)}", with_vectors=True)
                )
                for r in restored:
                    r["superseded_by"] = None
                    r["superseded_at"] = None
            await self._run(lambda: table.upsert(restored, delete_ids=[p.memory_id]))
            await self._committed(table)
        return MemoryDeleteResult(memory_id=p.memory_id, restored=sorted(r["id"] for r in restored))

    async def compact(self, p: MemoryCompactParams) -> MemoryCompactResult:
        """Remove expired working memory and merge near-duplicates, in one commit.

        Near-duplicates: active memories of the same type and session whose cosine similarity reaches
        ``duplicate_threshold`` and that the supersession rules do not read as a changed value or a negation.
        The most recent memory of each group survives with its id and content; it takes the highest importance,
        the latest expiry (none if any member has none), the first summary found (newest first), and the union of
        the group's ``supersedes``; ``merged_from`` lists every id merged into it (transitively). Memories that a
        removed one had superseded now point at the survivor.
        """
        now = self._clock()
        session = f" AND session_id = {quote(p.session_id)}" if p.session_id else ""
        async with self._lock:
            table = await self._open()
            expired = await self._run(lambda: table.scan(f"type = 'working' AND expires_at <= {int(now)}{session}"))
            active = await self._run(
                lambda: table.scan(self._where(now, session_id=p.session_id, include_global=False), with_vectors=True)
            )
            groups = _duplicate_groups(active, p.duplicate_threshold)
            survivors: list[Row] = []
            merged: list[MergedInfo] = []
            removed: list[str] = [r["id"] for r in expired]
            moved: dict[str, str] = {}
            for group in groups:
                survivor, others = _merge(group)
                survivors.append(survivor)
                merged.append(MergedInfo(memory_id=survivor["id"], merged_from=[o["id"] for o in others]))
                for o in others:
                    removed.append(o["id"])
                    moved[o["id"]] = survivor["id"]
            repointed: list[Row] = []
            if moved:
                repointed = await self._run(lambda: table.scan(f"superseded_by IN {id_list(moved)}", with_vectors=True))
                for r in repointed:
                    r["superseded_by"] = moved[r["superseded_by"]]
            if removed and not p.dry_run:
                await self._run(lambda: table.upsert([*survivors, *repointed], delete_ids=removed))
            if not p.dry_run:
                await self._committed(table, optimize=True)
            remaining = await self._run(table.count)
        if removed:
            logger.info("memory compact: %d expired removed, %d merged groups", len(expired), len(merged))
        return MemoryCompactResult(
            expired_removed=sorted(r["id"] for r in expired),
            merged=merged,
            remaining=remaining - len(removed) if p.dry_run else remaining,
            dry_run=p.dry_run,
        )


def _duplicate_groups(rows: list[Row], threshold: float) -> list[list[Row]]:
    """Connected components (size ≥ 2) of near-duplicate pairs within each (type, session) group."""
    by_key: dict[tuple[str, str | None], list[Row]] = {}
    for r in rows:
        by_key.setdefault((r["type"], r["session_id"]), []).append(r)
    groups: list[list[Row]] = []
    for members in by_key.values():
        if len(members) > 1:
            groups += _components(members, threshold)
    return groups


def _find(parent: list[int], i: int) -> int:
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


def _components(members: list[Row], threshold: float) -> list[list[Row]]:
    raw = np.asarray([m["vector"] for m in members], dtype=np.float32)
    norms = np.linalg.norm(raw, axis=1, keepdims=True)
    vectors = raw / np.where(norms == 0, 1, norms)
    parent = list(range(len(members)))
    for start in range(0, len(members), COMPACT_BLOCK):
        sims = vectors[start : start + COMPACT_BLOCK] @ vectors.T
        for a, b in zip(*np.nonzero(sims >= threshold), strict=True):
            i, j = start + int(a), int(b)
            if j <= i or _find(parent, i) == _find(parent, j):
                continue
            older, newer = sorted((members[i], members[j]), key=lambda m: m["created_at"])
            if supersede.compare_statements(older["content"], newer["content"]) is None:
                parent[_find(parent, i)] = _find(parent, j)
    components: dict[int, list[Row]] = {}
    for i, m in enumerate(members):
        components.setdefault(_find(parent, i), []).append(m)
    return [c for c in components.values() if len(c) > 1]


def _merge(group: list[Row]) -> tuple[Row, list[Row]]:
    ordered = sorted(group, key=lambda r: (r["created_at"], r["id"]), reverse=True)
    survivor, others = dict(ordered[0]), ordered[1:]
    survivor["importance"] = max(r["importance"] for r in group)
    expiries = [r["expires_at"] for r in group]
    survivor["expires_at"] = None if any(e is None for e in expiries) else max(expiries)
    survivor["summary"] = next((r["summary"] for r in ordered if r["summary"]), None)

    def union(field: str, extra: Iterable[str] = ()) -> list[str]:
        out: list[str] = []
        for r in ordered:
            out += r[field] or []
        return list(dict.fromkeys([*out, *extra]))

    survivor["supersedes"] = union("supersedes")
    survivor["merged_from"] = [i for i in union("merged_from", (o["id"] for o in others)) if i != survivor["id"]]
    return survivor, others
