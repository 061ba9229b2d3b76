"""Search: full-text and vector recall (concurrently), reciprocal-rank fusion, the optional rerank, and the join
against ``kn_blocks`` that drops hits not indexed from a block's current text (stale or deleted)."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from sidecar.knowledge.models import Citation
from sidecar.knowledge.service import normalize_folder

from .models import RankDetails, SearchFilters, SearchHit, SearchMode, SearchResult
from .profile import RetrievalProfile, get_profile
from .state import IndexState, mismatch

if TYPE_CHECKING:
    import numpy as np

    from sidecar.embeddings import Embedder

    from .rerank import Reranker
    from .vectors import VectorCache

Hit = tuple[str, str, float]  # block_id, text_hash, score


class Searcher:
    def __init__(self, state: IndexState, reranker: Reranker | None = None) -> None:
        self._state = state
        self._reranker = reranker

    async def search(
        self,
        query: str,
        mode: SearchMode = "hybrid",
        profile: RetrievalProfile | str | None = None,
        top_k: int | None = None,
        filters: SearchFilters | Mapping[str, Any] | None = None,
    ) -> SearchResult:
        """Search the blocks (the one entry point for ``search/query``, the agent's tool and benchmarks).

        ``profile`` is a profile id or a :class:`RetrievalProfile` (benchmarks vary one); ``top_k`` defaults to
        the profile's ``context_top_k``; ``filters`` narrows to notes (``note_ids``) or a folder subtree.
        """
        started = time.perf_counter()
        if filters is not None and not isinstance(filters, SearchFilters):
            filters = SearchFilters.model_validate(filters)
        prof = profile if isinstance(profile, RetrievalProfile) else get_profile(profile)
        k = top_k or prof.context_top_k
        embedder = self._state.embedder  # the query is embedded by the model checked here, even if switched meanwhile
        if mode != "fts":
            self._state.check_compatible()
        note_ids = await self._filter_note_ids(filters)
        fts: list[Hit] = []
        vec: list[Hit] = []
        qvec: np.ndarray | None = None
        if note_ids != []:
            fts_limit = max(prof.fts_recall, k)  # every stage sees at least top_k candidates
            vec_limit = max(prof.vector_recall, k)

            async def run_fts() -> None:
                nonlocal fts
                fts = await self._fts_hits(query, fts_limit, note_ids)

            async def run_vec() -> None:
                nonlocal vec, qvec
                vec, qvec = await self._vector_hits(query, vec_limit, note_ids, embedder)

            async with anyio.create_task_group() as tg:
                if mode != "vector":
                    tg.start_soon(run_fts)
                if mode != "fts":
                    tg.start_soon(run_vec)
        hits = await self._rank(query, mode, prof, k, fts, vec, qvec)
        return SearchResult(
            query=query,
            mode=mode,
            profile_id=prof.profile_id,
            items=hits,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
        )

    # -- recall ------------------------------------------------------------------------------------

    async def _vector_cache(self) -> VectorCache | None:
        state = self._state
        name = state.meta.get("vec_table")
        if not name:
            return None
        if state.cache is not None and state.cache_table == name:
            return state.cache
        async with state.cache_lock:
            if state.cache is not None and state.cache_table == name:
                return state.cache
            from .vectors import VectorCache

            def load() -> VectorCache:
                ids, notes, hashes, matrix = state.store.load_vectors(name)
                cache = VectorCache(matrix.shape[1], capacity=len(ids) + 1024)  # the table's, not the embedder's
                cache.upsert(ids, notes, hashes, matrix)
                return cache

            state.cache_loading, state.cache_backlog = name, []
            try:
                cache = await anyio.to_thread.run_sync(load)
                for op in state.cache_backlog:  # writes committed while it loaded
                    op(cache)
            except Exception:
                if state.meta.get("vec_table") == name:
                    raise
                cache = None  # a rebuild swapped in a new table (and dropped this one) meanwhile
            finally:
                state.cache_loading, state.cache_backlog = None, []
            if cache is None or state.meta.get("vec_table") != name:  # swapped or dropped meanwhile
                return state.active_cache()
            state.cache, state.cache_table = cache, name
            return cache

    async def _filter_note_ids(self, filters: SearchFilters | None) -> list[str] | None:
        folder = normalize_folder(filters.folder) if filters is not None else None  # "" and "/": the root
        if filters is None or (filters.note_ids is None and folder is None):
            return None

        def work(conn: sqlite3.Connection) -> list[str]:
            if folder is None:
                return list(dict.fromkeys(filters.note_ids or []))
            rows = conn.execute(
                "SELECT note_id FROM kn_notes WHERE folder = ? OR substr(folder, 1, ?) = ?",
                (folder, len(folder) + 1, folder + "/"),
            ).fetchall()
            ids = [r[0] for r in rows]
            if filters.note_ids is not None:
                wanted = set(filters.note_ids)
                ids = [i for i in ids if i in wanted]
            return ids

        return await self._state.db.read(work)

    async def _fts_hits(self, query: str, limit: int, note_ids: list[str] | None) -> list[Hit]:
        state = self._state
        while name := state.meta.get("fts_table"):
            try:
                return await anyio.to_thread.run_sync(state.store.fts_search, name, query, limit, note_ids)
            except Exception:
                if state.meta.get("fts_table") == name:
                    raise
                # a rebuild swapped in a new table (and dropped this one) under the query: ask the new one
        return []

    async def _vector_hits(
        self, query: str, limit: int, note_ids: list[str] | None, embedder: Embedder
    ) -> tuple[list[Hit], np.ndarray]:
        """``embedder``: the one whose model the search found compatible (a switch meanwhile does not count)."""
        cache = await self._vector_cache()
        model = self._state.meta.get("vec_model")
        if model is not None and model != embedder.info.as_dict():  # a rebuild swapped in another model meanwhile
            raise mismatch(embedder.info.as_dict(), model)

        def work() -> tuple[list[Hit], np.ndarray]:  # one thread hop for both steps
            qvec = self._state.embed(embedder, [query])[0]
            return ([] if cache is None else cache.search(qvec, limit, note_ids)), qvec

        return await anyio.to_thread.run_sync(work)

    # -- ranking -----------------------------------------------------------------------------------

    async def _hydrate(self, ids: Sequence[str]) -> dict[str, sqlite3.Row]:
        if not ids:
            return {}

        def work(conn: sqlite3.Connection) -> dict[str, sqlite3.Row]:
            marks = ", ".join("?" for _ in ids)
            rows = conn.execute(
                "SELECT b.block_id, b.note_id, b.position, b.kind, b.text, b.text_hash, b.citations,"
                f" n.title, n.folder FROM kn_blocks b JOIN kn_notes n ON n.note_id = b.note_id"
                f" WHERE b.block_id IN ({marks})",
                list(ids),
            ).fetchall()
            return {r["block_id"]: r for r in rows}

        return await self._state.db.read(work)

    async def _rank(
        self,
        query: str,
        mode: SearchMode,
        prof: RetrievalProfile,
        k: int,
        fts: list[Hit],
        vec: list[Hit],
        qvec: np.ndarray | None,
    ) -> list[SearchHit]:
        rows = await self._hydrate(list(dict.fromkeys([h[0] for h in fts] + [h[0] for h in vec])))
        # a hit counts only if it was indexed from the block's current text (no stale or deleted rows)
        fts = [h for h in fts if h[0] in rows and rows[h[0]]["text_hash"] == h[1]]
        vec = [h for h in vec if h[0] in rows and rows[h[0]]["text_hash"] == h[1]]
        details: dict[str, RankDetails] = {}
        for rank, (bid, _, score) in enumerate(fts, 1):
            d = details.setdefault(bid, RankDetails())
            d.fts_rank, d.fts_score = rank, score
        for rank, (bid, _, score) in enumerate(vec, 1):
            d = details.setdefault(bid, RankDetails())
            d.vector_rank, d.vector_score = rank, score
        if mode == "fts":
            order = [(h[0], h[2]) for h in fts]
        elif mode == "vector":
            order = [(h[0], h[2]) for h in vec]
        else:
            for d in details.values():
                d.rrf_score = sum(1.0 / (prof.rrf_k + r) for r in (d.fts_rank, d.vector_rank) if r is not None)
            fused = sorted(
                details,
                key=lambda b: (
                    -(details[b].rrf_score or 0.0),
                    min(r for r in (details[b].fts_rank, details[b].vector_rank) if r is not None),
                ),
            )
            order = [(b, details[b].rrf_score or 0.0) for b in fused]
            if prof.rerank and order:
                order = await self._rerank(query, qvec, order, prof, k, rows, details)
        hits: list[SearchHit] = []
        for bid, score in order:
            if score < prof.score_threshold:
                continue
            r = rows[bid]
            hits.append(
                SearchHit(
                    note_id=r["note_id"],
                    note_title=r["title"],
                    folder=r["folder"],
                    block_id=bid,
                    position=r["position"],
                    kind=r["kind"],
                    text=r["text"],
                    score=score,
                    ranks=details[bid],
                    citations=[Citation.model_validate(c) for c in json.loads(r["citations"])],
                )
            )
            if len(hits) >= k:
                break
        return hits

    def _reranker_or_default(self) -> Reranker:
        if self._reranker is None:
            from .rerank import CosineTermReranker

            self._reranker = CosineTermReranker()
        return self._reranker

    async def _rerank(
        self,
        query: str,
        qvec: np.ndarray | None,
        order: list[tuple[str, float]],
        prof: RetrievalProfile,
        k: int,
        rows: dict[str, sqlite3.Row],
        details: dict[str, RankDetails],
    ) -> list[tuple[str, float]]:
        from .rerank import Candidate

        head = order[: max(prof.rerank_candidates, k)]
        cache = self._state.active_cache()
        candidates = [
            Candidate(bid, rows[bid]["text"], cache.vector_of(bid) if cache is not None else None) for bid, _ in head
        ]
        reranker = self._reranker_or_default()
        scores = await anyio.to_thread.run_sync(reranker.scores, query, qvec, candidates)
        for (bid, _), s in zip(head, scores, strict=True):
            details[bid].rerank_score = s
        reranked = sorted(zip([b for b, _ in head], scores, strict=True), key=lambda x: -x[1])
        return reranked
