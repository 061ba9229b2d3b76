#!/usr/bin/env python3
"""The four paged lists at 10,000 rows each, through the services (not the wire), with default paging.

    .venv/bin/python scripts/bench/bench_list_paging.py [--rows 10000] [--calls 30]

Goal (issue 22): ``exports/list``, ``media/transcriptions/list``, ``benchmarks/runs/list`` and ``agent/runs/list``
each answer under 5 ms at 10,000 rows (paged in SQL, not in Python). The rows are written through the store layer
(the services' ``Database``, one ``executemany`` per table) into the production schema that ``open_headless``
migrated; each list is then called ``--calls`` times (default page, then filtered by status) and the median and
p90 are printed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sidecar.core.settings import Settings
from sidecar.wiring import open_headless

GOAL_MS = 5.0


def _stamp(i: int) -> str:
    return f"2026-01-01T00:{i // 3600 % 60:02d}:{i // 60 % 60:02d}.{i % 60:02d}0000Z"


def fill(conn: Any, rows: int) -> None:
    """``rows`` exports, transcriptions, benchmark runs (a tenth cancelled: metrics from their cases) and agent runs."""
    jobs: list[tuple[Any, ...]] = []
    media: list[tuple[Any, ...]] = []
    bench: list[tuple[Any, ...]] = []
    agent: list[tuple[Any, ...]] = []
    for i in range(rows):
        at = _stamp(i)
        status = "cancelled" if i % 10 == 0 else "completed" if i % 2 else "queued"
        jobs.append((f"exp-{i}", "export", status, '{"format":"html"}', at, at))
        jobs.append((f"tr-{i}", "transcription", status, "{}", at, at))
        media.append((f"tr-{i}", f"att-{i}", "default", 0, 0))
        bench_status = "cancelled" if i % 10 == 0 else "completed"
        jobs.append((f"bench-{i}", "benchmark-rag", bench_status, "{}", at, at))
        metrics = None if bench_status == "cancelled" else '{"hybrid":{"hit_at_5":1.0}}'
        bench.append((f"bench-{i}", "rag", "rag-core-v1", "sha", '{"k":10,"modes":["hybrid"]}', metrics, at))
        agent.append((f"run-{i}", f"s-{i % 100}", status, "p", "m", 8, "{}", at, at))
    conn.executemany(
        "INSERT INTO jobs (job_id, kind, status, params, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)", jobs
    )
    conn.executemany(
        "INSERT INTO media_transcriptions (job_id, attachment_id, profile_id, diarization, word_timestamps)"
        " VALUES (?, ?, ?, ?, ?)",
        media,
    )
    conn.executemany(
        "INSERT INTO bench_runs (run_id, kind, dataset_id, dataset_hash, config_snapshot, metrics, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        bench,
    )
    conn.executemany(
        "INSERT INTO agent_runs (run_id, session_id, status, provider_id, model, max_iterations, summary,"
        " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        agent,
    )


async def timed(call: Callable[[], Awaitable[Any]], calls: int) -> tuple[float, float, int]:
    await call()  # warm: first-use adapters and the page cache
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        page = await call()
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(0.9 * len(times)))], len(page.items)


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp) / "data", secret_key_file=Path(tmp) / "master.key")
        settings.data_dir.mkdir()
        async with AsyncExitStack() as stack:
            tg = await stack.enter_async_context(anyio.create_task_group())
            s = await open_headless(settings, stack, tg)
            t = time.perf_counter()
            await s.db.run(lambda conn: fill(conn, args.rows))
            print(f"filled {args.rows:,} rows per list in {time.perf_counter() - t:.1f} s (through Database.run)")
            lists: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
                ("exports/list", lambda: s.exports.list()),
                ("exports/list status=completed", lambda: s.exports.list("completed")),
                ("media/transcriptions/list", lambda: s.media.list()),
                ("media/transcriptions/list status=queued", lambda: s.media.list("queued")),
                ("benchmarks/runs/list", lambda: s.benchmarks.list(None, None, 50, 0)),
                ("benchmarks/runs/list status=cancelled", lambda: s.benchmarks.list(None, "cancelled", 50, 0)),
                ("agent/runs/list", lambda: s.agent.list(status=None, session_id=None, limit=50, offset=0)),
                (
                    "agent/runs/list session_id=s-7",
                    lambda: s.agent.list(status=None, session_id="s-7", limit=50, offset=0),
                ),
            ]
            print(f"{'list':<42} {'items':>5} {'median ms':>10} {'p90 ms':>8}")
            worst = 0.0
            for name, call in lists:
                med, p90, n = await timed(call, args.calls)
                worst = max(worst, med)
                print(f"{name:<42} {n:>5} {med:>10.2f} {p90:>8.2f}")
            verdict = "ok" if worst < GOAL_MS else f"OVER the {GOAL_MS:g} ms goal"
            print(f"slowest median {worst:.2f} ms ({verdict})")
            tg.cancel_scope.cancel()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=30)
    anyio.run(main, parser.parse_args())
