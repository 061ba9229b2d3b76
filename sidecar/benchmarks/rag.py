"""The RAG benchmark runner: the dataset's corpus indexed by the real retrieval service into an isolated store
(its own SQLite file and LanceDB folder under the run's work dir, never the user's notes; removed afterwards),
then every case searched in every mode through ``RetrievalService.search`` — the same entry point as
``search/query`` and the agent's tool — with the run's RetrievalProfile."""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from sidecar.core.common import ErrorInfo
from sidecar.core.errors import BadRequestError, SidecarError

from .datasets import Dataset
from .metrics import rag_failure, rag_metrics, score_rag_case
from .models import CaseResult, RagCase

if TYPE_CHECKING:
    from sidecar.jobs import JobContext
    from sidecar.retrieval.models import EmbedderConfig
    from sidecar.retrieval.profile import RetrievalProfile
    from sidecar.retrieval.service import RetrievalService

logger = logging.getLogger(__name__)

SaveCase = Callable[[int, CaseResult], Awaitable[None]]
DEFAULT_K = 10


def incompatible(message: str, **details: Any) -> BadRequestError:
    return BadRequestError(message, code="BENCHMARK_INDEX_INCOMPATIBLE", details=details, status=409)


def run_failed(message: str, **details: Any) -> SidecarError:
    return SidecarError(message, code="BENCHMARK_RUN_FAILED", details=details, status=500)


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


@contextlib.asynccontextmanager
async def isolated_retrieval(
    folder: Path, embedder: EmbedderConfig, corpus: list[Any]
) -> AsyncIterator[tuple[RetrievalService, dict[str, Any]]]:
    """A fresh knowledge store + retrieval index in ``folder`` holding ``corpus`` (indexed); removed on exit."""
    from sidecar.knowledge.service import KnowledgeService
    from sidecar.retrieval.rerank import CosineTermReranker
    from sidecar.retrieval.service import RetrievalService
    from sidecar.storage.sqlite import Database

    await anyio.Path(folder).mkdir(parents=True, exist_ok=True)
    db = await Database.open(folder)
    try:
        knowledge = KnowledgeService(db, folder)
        await knowledge.migrate()
        reranker = CosineTermReranker()
        retrieval = RetrievalService(db, folder, default_embedder=embedder, reranker=reranker)
        await retrieval.start()
        t0 = time.perf_counter()
        notes = [(n.note_id, n.title, n.folder, [(b.block_id, b.text) for b in n.blocks]) for n in corpus]
        if notes:
            await knowledge.import_fixture_notes(notes)
            await retrieval.sync()
        status = await retrieval.status()
        if status.error_message:
            raise run_failed(f"Indexing the benchmark corpus failed: {status.error_message}")
        blocks = sum(len(n[3]) for n in notes)
        if notes and status.fts_index.block_count != blocks:
            raise run_failed("The benchmark corpus was not fully indexed.", indexed=status.fts_index.block_count)
        index = {
            "embedding": status.embedding.model_dump(),
            "vector_index": status.vector_index.model_dump(),
            "fts_index": status.fts_index.model_dump(),
            "reranker": type(reranker).__name__,
            "notes": len(notes),
            "blocks": blocks,
            "indexing_ms": round((time.perf_counter() - t0) * 1000, 1),
        }
        yield retrieval, index
    finally:
        with anyio.CancelScope(shield=True):
            await db.close()
            await anyio.to_thread.run_sync(remove_tree, folder)


def check_compatible(index: dict[str, Any], modes: list[str]) -> None:
    """The vectors must come from the embedder that embeds the queries (phase-2 §9.9)."""
    if not any(m != "fts" for m in modes):
        return
    vec, emb = index["vector_index"], index["embedding"]
    same = all(vec.get(f) == emb.get(f) for f in ("model_id", "model_version", "dimension", "normalization"))
    if not (vec.get("compatible") and same and vec.get("block_count") == index["blocks"]):
        raise incompatible("The benchmark index does not match the embedder.", embedding=emb, vector_index=vec)


async def _search_case(
    retrieval: RetrievalService, case: RagCase, mode: str, profile: RetrievalProfile, depth: int
) -> tuple[list[tuple[str, str]], float]:
    try:
        found = await retrieval.search(case.query, mode, profile, depth)  # type: ignore[arg-type]
    except SidecarError as exc:
        if exc.code == "INDEX_MODEL_MISMATCH":
            raise incompatible(exc.message, **exc.details) from None
        raise
    return [(h.note_id, h.block_id) for h in found.items], found.duration_ms


def _error_result(case: RagCase, mode: str, rep: int, exc: SidecarError) -> CaseResult:
    zero = {"hit_at_1": 0.0, "hit_at_5": 0.0, "recall_at_k": 0.0, "mrr": 0.0, "ndcg_at_10": 0.0}
    return CaseResult(
        case_id=case.case_id,
        mode=mode,
        repeat=rep,
        status="error",
        failure_reason=f"search failed: {exc.message}",
        error=ErrorInfo(code=exc.code, message=exc.message, details=exc.details),
        tags=case.tags,
        scores={**zero, "citation_hit_rate": 0.0 if case.citation_required else None},
    )


async def run_cases(
    ctx: JobContext,
    retrieval: RetrievalService,
    dataset: Dataset,
    cases: list[RagCase],
    modes: list[str],
    profile: RetrievalProfile,
    k: int,
    repeat: int,
    save: SaveCase,
) -> dict[str, Any]:
    """Search every case in every mode (``repeat`` times), saving each result as it finishes."""
    depth = max(k, DEFAULT_K, profile.context_top_k)
    total = len(cases) * len(modes) * repeat
    done = 0
    results: dict[str, list[CaseResult]] = {m: [] for m in modes}
    await ctx.progress("searching", 0, total, f"0/{total} searches")
    for rep in range(repeat):
        for case in cases:
            for mode in modes:
                ctx.check_cancelled()
                try:
                    hits, latency = await _search_case(retrieval, case, mode, profile, depth)
                except SidecarError as exc:
                    if exc.code == "BENCHMARK_INDEX_INCOMPATIBLE":
                        raise
                    logger.warning("benchmark case %s (%s) failed: %s", case.case_id, mode, exc.message)
                    result = _error_result(case, mode, rep, exc)
                else:
                    scores = score_rag_case(case, hits, k, profile.context_top_k)
                    reason = rag_failure(scores)
                    rank = scores.pop("rank")
                    result = CaseResult(
                        case_id=case.case_id,
                        mode=mode,
                        repeat=rep,
                        status="failed" if reason else "passed",
                        failure_reason=reason,
                        tags=case.tags,
                        latency_ms=latency,
                        scores=scores,
                        details={
                            "rank": rank,
                            "retrieved_note_ids": [n for n, _ in hits[:k]],
                            "retrieved_block_ids": [b for _, b in hits[:k]],
                        },
                    )
                await save(done, result)
                done += 1
                results[mode].append(result)
                await ctx.emit(
                    "CaseCompleted",
                    {
                        "case_id": case.case_id,
                        "mode": mode,
                        "repeat": rep,
                        "status": result.status,
                        "scores": result.scores,
                        "latency_ms": result.latency_ms,
                        "failure_reason": result.failure_reason,
                    },
                )
                await ctx.progress("searching", done, total, f"{done}/{total} searches")
    return {m: rag_metrics(rs, k).model_dump(mode="json") for m, rs in results.items()}
