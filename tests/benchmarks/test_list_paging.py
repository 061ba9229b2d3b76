"""benchmarks/runs/list pages in SQL (issue 22): a fixed number of queries whatever the page size, from one index,
with the same runs (and metrics) as reading each run alone."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from sidecar.benchmarks.models import CaseResult
from tests.support.bench_env import BenchEnv

pytestmark = pytest.mark.anyio


def _fill(conn: sqlite3.Connection, runs: int) -> None:
    for i in range(runs):
        at = f"2026-01-01T00:00:{i:02d}.000000Z"
        cancelled = i % 3 == 0
        conn.execute(
            "INSERT INTO bench_runs (run_id, kind, dataset_id, dataset_hash, config_snapshot, metrics, created_at)"
            " VALUES (?, 'rag', 'd', 'h', '{\"k\":5,\"modes\":[\"fts\"]}', ?, ?)",
            (f"run-{i}", None if cancelled else '{"fts":{"hit_at_5":1.0}}', at),
        )
        conn.execute(
            "INSERT INTO jobs (job_id, kind, status, params, created_at, updated_at)"
            " VALUES (?, 'benchmark-rag', ?, '{}', ?, ?)",
            (f"run-{i}", "cancelled" if cancelled else "completed", at, at),
        )


async def _case(env: BenchEnv, run_id: str, seq: int, status: str) -> None:
    scores = {"hit_at_1": 1.0, "hit_at_5": 1.0, "recall_at_k": 1.0, "mrr": 1.0, "ndcg_at_k": 1.0}
    result = CaseResult(case_id=f"c{seq}", mode="fts", status=status, latency_ms=3.0, scores=scores)  # type: ignore[arg-type]
    await env.bench._rows.add_case(run_id, seq, result)


async def _selects(env: BenchEnv, call: Any) -> tuple[Any, list[str]]:
    seen: list[str] = []
    await env.db.read(lambda c: c.set_trace_callback(seen.append))
    try:
        out = await call()
    finally:
        await env.db.read(lambda c: c.set_trace_callback(None))
    return out, [s for s in seen if s.lstrip().upper().startswith("SELECT")]


async def test_a_page_costs_the_same_queries_whatever_its_size_and_matches_get(env: BenchEnv) -> None:
    await env.db.run(lambda c: _fill(c, 30))
    await _case(env, "run-0", 0, "passed")
    await _case(env, "run-0", 1, "failed")
    await _case(env, "run-3", 0, "passed")

    small, small_selects = await _selects(env, lambda: env.bench.list(None, None, 3, 0))  # run-27 is cancelled
    page, page_selects = await _selects(env, lambda: env.bench.list(None, None, 30, 0))
    assert len(small.items) == 3 and len(page.items) == 30 and page.page.total == 30
    assert len(page_selects) == len(small_selects) <= 5, page_selects
    assert [r.run_id for r in page.items] == [f"run-{i}" for i in range(29, -1, -1)]  # newest first
    assert page.items == [await env.bench.get(r.run_id) for r in page.items]  # metrics of cancelled runs too
    cancelled = {r.run_id: r for r in page.items if r.status == "cancelled"}
    assert cancelled["run-0"].metrics != cancelled["run-6"].metrics  # each from its own cases

    only, _ = await _selects(env, lambda: env.bench.list("rag", "cancelled", 50, 0))
    assert only.page.total == 10 and {r.status for r in only.items} == {"cancelled"}
    assert (await env.bench.list("agent", None, 50, 0)).page.total == 0


async def test_the_filtered_page_reads_one_index_without_sorting(env: BenchEnv) -> None:
    await env.db.run(lambda c: _fill(c, 5))
    _, selects = await _selects(env, lambda: env.bench.list("rag", "completed", 50, 0))
    plans = await env.db.read(
        lambda c: [c.execute("EXPLAIN QUERY PLAN " + s).fetchall() for s in selects if "FROM jobs WHERE kind" in s]
    )
    assert len(plans) == 2  # the count and the page
    for plan in plans:
        details = " | ".join(str(step[-1]) for step in plan)
        assert "jobs_kind_status_created" in details and "TEMP B-TREE" not in details, details
