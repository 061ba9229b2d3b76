#!/usr/bin/env python3
"""Agent runtime figures (issue 4 item 7): loop overhead per iteration, durable trace throughput, memory per run.

    .venv/bin/python scripts/bench/bench_agent.py [--iterations 200] [--repeats 5] [--events 20000]
        [--quick] [--profile] [--data-dir DIR]

Prints figures, asserts nothing about time. Everything runs in-process against the production stack
(``Database.open``: WAL + synchronous=NORMAL, ``EventLog``, ``ProviderService`` with the scripted ``mock``
preset, ``AgentService`` with ``default_registry()``).

1. Loop overhead (goal < 2 ms per iteration not spent in the model). A run of ``--iterations`` ReAct iterations,
   each mock turn one ``calculator`` call, the last a text answer. ``ProviderService.chat`` and
   ``ToolRegistry.execute`` are wrapped to add up the time inside them. "model" is the in-process mock adapter
   plus the provider service (its two SQLite look-ups per call: provider row, ``llm.maxRetries``); a real model
   adds network and generation time, not agent overhead. With ``params.stream`` the ``emit`` callback the loop
   hands to ``chat`` (trace delta + ``to_line()`` + the sink) is timed apart and counted as loop cost.
2. Trace write throughput (goal >= 5k events/s, durable): ``TraceWriter`` with its flusher, ~300-byte
   ToolCall/ToolResult-like events; ``EventLog.append`` one event per transaction as the baseline; the
   ``TraceWriter`` case again with ``PRAGMA synchronous=FULL``. The count is checked in SQLite afterwards.
3. Memory of a run producing ~1,000 trace events: tracemalloc peak and retained (after gc), RSS delta.

``--profile`` adds a cProfile of one loop-overhead run (event-loop thread only: SQLite work in worker threads
is not seen) and prints the top self-time functions of the ``sidecar`` package.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import cProfile
import gc
import json
import logging
import os
import pstats
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from sidecar.agent.models import AgentRunCreateParams  # noqa: E402
from sidecar.agent.tracing import MAX_BUFFERED, TraceWriter  # noqa: E402
from tests.support.agent_env import AgentEnv, agent_environment  # noqa: E402

log = logging.getLogger("bench_agent")
MS = 1000.0


# -- environment ------------------------------------------------------------------------------------------------


Env = AgentEnv


def environment(data_dir: Path) -> contextlib.AbstractAsyncContextManager[AgentEnv]:
    # a workspace root makes the file tools available, so the context carries the full tool list (realistic)
    return agent_environment(data_dir, data_dir / "ws")


def ir_request(*, stream: bool, session: str = "bench") -> dict[str, Any]:
    return {
        "meta": {"sessionId": session, "iteration": 1, "requestId": "bench-1", "timestamp": 1, "agentVersion": "b"},
        "systemPrompt": {
            "roleDefinition": "You are a careful assistant that uses tools.",
            "outputConstraints": "Answer briefly.",
            "safetyGuidelines": "Never reveal secrets.",
        },
        "messages": [{"role": "user", "content": "Compute 6*7 again and again, then answer.", "timestamp": 1}],
        "params": {"stream": stream},
    }


def tool_turns(iterations: int, *, text: str = "", reasoning: str = "", chunk_chars: int = 10_000) -> list[dict]:
    turns: list[dict[str, Any]] = [
        {
            "text": text,
            "reasoning": reasoning,
            "chunk_chars": chunk_chars,
            "tool_calls": [{"name": "calculator", "args": {"expression": f"6*7+{i}"}, "id": f"call_{i:04d}"}],
        }
        for i in range(1, iterations)
    ]
    turns.append({"text": "The answer is 42.", "chunk_chars": chunk_chars})
    return turns


async def set_script(env: Env, turns: list[dict[str, Any]]) -> None:
    options = {"script": {"turns": turns}}
    if any(p.provider_id == "mock" for p in await env.providers.list()):
        await env.providers.update("mock", options=options)
    else:
        await env.providers.create(provider_id="mock", preset="mock", options=options)


# -- timing wrappers --------------------------------------------------------------------------------------------


@dataclass
class Timers:
    model: float = 0.0
    model_db: float = 0.0
    """Of ``model``: SQLite round trips made inside ``chat`` (provider row, config), incl. waiting for the DB."""
    emit: float = 0.0
    tool: float = 0.0
    model_calls: int = 0
    tool_calls: int = 0
    chunks: int = 0
    sink_bytes: int = 0
    gaps: list[float] = field(default_factory=list)
    """Per iteration boundary: end of model call i -> start of model call i+1, tool time removed."""
    _last_end: float | None = None
    _tool_since: float = 0.0

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]


_IN_CHAT: contextvars.ContextVar[bool] = contextvars.ContextVar("in_chat", default=False)


def instrument(env: Env, timers: Timers) -> None:
    providers, registry, db = env.providers, env.agent.registry, env.db
    chat, execute, db_run = providers.chat, registry.execute, db.run

    async def timed_db_run(*args: Any, **kwargs: Any) -> Any:
        if not _IN_CHAT.get():  # the flusher task does not inherit the run task's context var
            return await db_run(*args, **kwargs)
        t0 = time.perf_counter()
        try:
            return await db_run(*args, **kwargs)
        finally:
            timers.model_db += time.perf_counter() - t0

    async def timed_chat(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        token = _IN_CHAT.set(True)
        if timers._last_end is not None:
            timers.gaps.append(t0 - timers._last_end - timers._tool_since)
        timers._tool_since = 0.0
        emit = kwargs.get("emit")
        emitted = 0.0
        if emit is not None:

            async def timed_emit(event: Any) -> None:
                nonlocal emitted
                e0 = time.perf_counter()
                try:
                    await emit(event)
                finally:
                    emitted += time.perf_counter() - e0
                    timers.chunks += 1

            kwargs["emit"] = timed_emit
        try:
            return await chat(*args, **kwargs)
        finally:
            _IN_CHAT.reset(token)
            end = time.perf_counter()
            timers.model += end - t0 - emitted
            timers.emit += emitted
            timers.model_calls += 1
            timers._last_end = end

    async def timed_execute(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await execute(*args, **kwargs)
        finally:
            dt = time.perf_counter() - t0
            timers.tool += dt
            timers._tool_since += dt
            timers.tool_calls += 1

    providers.chat = timed_chat  # type: ignore[method-assign]
    registry.execute = timed_execute  # type: ignore[method-assign]
    db.run = timed_db_run  # type: ignore[method-assign]


async def run_once(
    env: Env, *, stream: bool, max_iterations: int, sink: Callable[[bytes], Awaitable[None]] | None = None
) -> tuple[str, float, float]:
    """Create and run one run to its end; (run_id, create seconds, run seconds from start() to done)."""
    params = AgentRunCreateParams.model_validate(
        {"provider_id": "mock", "request": ir_request(stream=stream), "max_iterations": max_iterations}
    )
    t0 = time.perf_counter()
    run, start = await env.agent.create(params, stream=sink)
    t1 = time.perf_counter()
    live = env.agent._live[run.run_id]
    start()
    await live.done.wait()
    t2 = time.perf_counter()
    final = await env.agent.get(run.run_id)
    if final.status != "completed":
        raise SystemExit(f"run {run.run_id} ended {final.status}: {final.error}")
    return run.run_id, t1 - t0, t2 - t1


async def count_events(env: Env, run_id: str) -> dict[str, int]:
    rows = await env.db.read(
        lambda conn: conn.execute(
            "SELECT event, COUNT(*) FROM events WHERE resource_id = ? GROUP BY event", (run_id,)
        ).fetchall()
    )
    return {str(r[0]): int(r[1]) for r in rows}


# -- 1. loop overhead -------------------------------------------------------------------------------------------


@dataclass
class LoopRow:
    total: float
    model: float
    model_db: float
    emit: float
    tool: float
    iterations: int
    events: int
    early_gap: float
    late_gap: float
    chunks: int


async def loop_case(
    env: Env, timers: Timers, *, iterations: int, repeats: int, stream: bool, text: str, chunk_chars: int
) -> tuple[list[LoopRow], float, dict[str, int]]:
    await set_script(env, tool_turns(iterations, text=text, chunk_chars=chunk_chars))
    sink_bytes = 0

    async def sink(line: bytes) -> None:
        nonlocal sink_bytes
        sink_bytes += len(line)

    await run_once(env, stream=stream, max_iterations=iterations, sink=sink if stream else None)  # warm-up
    rows: list[LoopRow] = []
    creates: list[float] = []
    counts: dict[str, int] = {}
    for _ in range(repeats):
        gc.collect()
        timers.reset()
        run_id, created, total = await run_once(
            env, stream=stream, max_iterations=iterations, sink=sink if stream else None
        )
        counts = await count_events(env, run_id)
        gaps = timers.gaps
        edge = max(1, min(20, len(gaps) // 4))
        rows.append(
            LoopRow(
                total=total,
                model=timers.model,
                model_db=timers.model_db,
                emit=timers.emit,
                tool=timers.tool,
                iterations=timers.model_calls,
                events=sum(counts.values()),
                early_gap=statistics.median(gaps[:edge]) if gaps else 0.0,
                late_gap=statistics.median(gaps[-edge:]) if gaps else 0.0,
                chunks=timers.chunks,
            )
        )
        creates.append(created)
    return rows, statistics.median(creates), counts


def loop_table(name: str, rows: list[LoopRow], create_s: float) -> list[str]:
    def per_iter(r: LoopRow, value: float) -> float:
        return value / r.iterations * MS

    cols = {
        "total": [per_iter(r, r.total) for r in rows],
        "model": [per_iter(r, r.model) for r in rows],
        "of which db": [per_iter(r, r.model_db) for r in rows],
        "tool": [per_iter(r, r.tool) for r in rows],
        "emit": [per_iter(r, r.emit) for r in rows],
        "total-model": [per_iter(r, r.total - r.model) for r in rows],
        "total-model-tool": [per_iter(r, r.total - r.model - r.tool) for r in rows],
        "gap early": [r.early_gap * MS for r in rows],
        "gap late": [r.late_gap * MS for r in rows],
    }
    r0 = rows[0]
    out = []
    for stat, fn in (("median", statistics.median), ("best", min)):
        cells = " | ".join(f"{fn(v):.3f}" for v in cols.values())
        out.append(f"| {name} | {stat} | {r0.iterations} | {r0.events} | {r0.chunks} | {cells} | {create_s * MS:.1f} |")
    return out


async def bench_loop(env: Env, timers: Timers, iterations: int, repeats: int, out: Any) -> None:
    out.write(
        f"\n## 1. Loop overhead per iteration (ms/iteration; {repeats} runs of {iterations} iterations + 1 warm-up;"
        " goal: total-model < 2 ms)\n"
    )
    out.write(
        "| case | stat | iters | events | chunks | total | model | model: db | tool | emit | total-model"
        " | total-model-tool | gap early | gap late | create ms |\n" + "|---" * 15 + "|\n"
    )
    text = ("Let me work this out with the calculator tool before I answer you. " * 3)[:160]
    cases = [
        ("tool only, stream off", False, "", 10_000),
        ("+160-char text, stream off", False, text, 10_000),
        ("+160-char text, stream on (20 chunks)", True, text, 8),
    ]
    results: dict[str, list[LoopRow]] = {}
    for name, stream, txt, chunk in cases:
        log.info("loop case: %s", name)
        rows, create_s, counts = await loop_case(
            env, timers, iterations=iterations, repeats=repeats, stream=stream, text=txt, chunk_chars=chunk
        )
        results[name] = rows
        for line in loop_table(name, rows, create_s):
            out.write(line + "\n")
        out.flush()
        log.info("  events by type: %s", json.dumps(counts, sort_keys=True))
    stream_rows = results[cases[2][0]]
    plain_rows = results[cases[1][0]]
    chunks = statistics.median(r.chunks for r in stream_rows)
    extra = statistics.median((r.total - r.model) / r.iterations for r in stream_rows) - statistics.median(
        (r.total - r.model) / r.iterations for r in plain_rows
    )
    per_chunk = statistics.median(r.emit / max(1, r.chunks) for r in stream_rows)
    out.write(
        f"stream on: {chunks / stream_rows[0].iterations:.1f} stream lines/iteration; emit callback "
        f"(trace.emit + to_line + sink) {per_chunk * 1e6:.1f} µs/line; streaming adds {extra * MS:.3f} ms/iteration"
        " of loop cost over the same text unstreamed\n"
    )
    out.write(
        "total = start() -> run done (incl. final commit) / iterations; model = inside ProviderService.chat (in-process"
        " mock adapter + provider service) minus emit; model: db = of model, the SQLite round trips inside chat"
        " (provider row, llm.maxRetries; incl. waiting behind trace commits); emit = the stream callback;"
        " gap early/late = median time between model calls with tool time removed, first/last 20 iterations"
        " (context grows with the transcript)\n"
    )


# -- 2. trace throughput ----------------------------------------------------------------------------------------


def trace_payloads(n: int, run_id: str) -> list[tuple[str, dict[str, Any]]]:
    """Alternating ToolCall / ToolResult-like events of ~300 bytes as stored JSON."""
    items: list[tuple[str, dict[str, Any]]] = []
    for i in range(n):
        call_id = f"call_{i:06d}"
        if i % 2 == 0:
            items.append(
                (
                    "ToolCall",
                    {
                        "tool_call_id": call_id,
                        "tool_name": "read_file",
                        "args": {"path": f"reports/2024/q{i % 4 + 1}/summary-{i:06d}.md", "max_bytes": 65536},
                        "parent_model_call_id": f"{run_id}.m{i // 2 + 1}",
                        "step": i // 2 + 1,
                        "note": "x" * 70,
                    },
                )
            )
        else:
            items.append(
                (
                    "ToolResult",
                    {
                        "tool_call_id": call_id,
                        "tool_name": "calculator",
                        "parent_model_call_id": f"{run_id}.m{i // 2 + 1}",
                        "step": i // 2 + 1,
                        "success": True,
                        "duration_ms": 3,
                        "summary": f"6*7+{i} = {42 + i}; the calculator evaluated the expression exactly.",
                        "result": {"expression": f"6*7+{i}", "value": 42 + i},
                    },
                )
            )
    return items


async def trace_writer_rate(env: Env, n: int, *, checkpoint: bool) -> tuple[float, int, int]:
    run_id = f"bench_trace_{time.monotonic_ns()}"
    await env.events.create_resource(run_id, "bench")
    items = trace_payloads(n, run_id)
    trace = TraceWriter(env.events, run_id)
    gc.collect()
    async with anyio.create_task_group() as tg:
        tg.start_soon(trace.run_flusher)
        t0 = time.perf_counter()
        for event, data in items:
            await trace.emit_bounded(event, data)
            if checkpoint:
                await anyio.lowlevel.checkpoint()
        await trace.flush()
        elapsed = time.perf_counter() - t0
        trace.close()
    (stored,) = await env.db.read(
        lambda conn: conn.execute("SELECT COUNT(*) FROM events WHERE resource_id = ?", (run_id,)).fetchone()
    )
    if stored != n:
        raise SystemExit(f"trace bench: {stored} events stored, {n} emitted")
    return n / elapsed, stored, trace.committed


async def append_rate(env: Env, n: int) -> float:
    run_id = f"bench_append_{time.monotonic_ns()}"
    await env.events.create_resource(run_id, "bench")
    items = trace_payloads(n, run_id)
    t0 = time.perf_counter()
    for event, data in items:
        await env.events.append(run_id, event, data)
    elapsed = time.perf_counter() - t0
    (stored,) = await env.db.read(
        lambda conn: conn.execute("SELECT COUNT(*) FROM events WHERE resource_id = ?", (run_id,)).fetchone()
    )
    if stored != n:
        raise SystemExit(f"append bench: {stored} events stored, {n} appended")
    return n / elapsed


async def set_synchronous(env: Env, level: str) -> int | None:
    """Set ``PRAGMA synchronous`` on the database's connection; the value read back, ``None`` if not possible.

    ``Database`` has no public way: ``run`` wraps ``fn`` in ``BEGIN IMMEDIATE``, and SQLite refuses to change the
    safety level inside a transaction; ``pragma`` only reads. So this takes the connection's lock and uses the
    private connection directly (a bench only)."""
    db = env.db
    conn, lock = getattr(db, "_conn", None), getattr(db, "_lock", None)
    if conn is None or lock is None:
        return None

    def work() -> None:
        with lock:
            conn.execute(f"PRAGMA synchronous = {level}")

    await anyio.to_thread.run_sync(work)
    return int(await db.pragma("synchronous"))


async def bench_trace(env: Env, n: int, n_append: int, repeats: int, out: Any) -> None:
    sample = json.dumps(trace_payloads(2, "run_" + "0" * 32)[1][1], separators=(",", ":"))
    journal = await env.db.pragma("journal_mode")
    sync = int(await env.db.pragma("synchronous"))
    out.write(
        f"\n## 2. Trace write throughput, durable (goal >= 5,000 events/s; median of {repeats}; events ~"
        f"{len(sample)} bytes of JSON; database {env.db.path.parent}, journal_mode={journal},"
        f" synchronous={sync} (1=NORMAL))\n"
    )
    out.write(
        "| path | events | events/s median | events/s best | µs/event | transactions |\n|---|---|---|---|---|---|\n"
    )

    async def row(name: str, count: int, fn: Callable[[], Awaitable[float]], txns: str) -> None:
        log.info("trace case: %s", name)
        rates = [await fn() for _ in range(repeats)]
        med = statistics.median(rates)
        out.write(f"| {name} | {count} | {med:,.0f} | {max(rates):,.0f} | {1e6 / med:.1f} | {txns} |\n")
        out.flush()

    batches = f"~{max(1, n // MAX_BUFFERED)} (batches of {MAX_BUFFERED})"

    async def tw() -> float:
        return (await trace_writer_rate(env, n, checkpoint=False))[0]

    async def tw_yield() -> float:
        return (await trace_writer_rate(env, n, checkpoint=True))[0]

    async def ap() -> float:
        return await append_rate(env, n_append)

    await row("TraceWriter.emit_bounded, tight loop", n, tw, batches)
    await row("TraceWriter.emit_bounded + checkpoint per event", n, tw_yield, "flusher batches (10 ms gather)")
    await row("EventLog.append, 1 event per transaction", n_append, ap, "1 per event")
    got = await set_synchronous(env, "FULL")
    if got == 2:  # FULL
        await row("TraceWriter.emit_bounded, tight loop, synchronous=FULL", n, tw, batches)
        await row("EventLog.append, 1 per txn, synchronous=FULL", n_append, ap, "1 per event")
    else:
        out.write(f"synchronous=FULL could not be set (read back {got}); skipped\n")
    await set_synchronous(env, "NORMAL")
    out.write(
        "Every figure counts committed transactions (the count is re-read from SQLite). WAL + synchronous=NORMAL:"
        " a committed transaction is in the OS page cache and survives a kill -9 of the sidecar; only an OS crash"
        " or power loss can roll back the last commits. synchronous=FULL also fsyncs the WAL on every commit"
        " (survives power loss).\n"
    )


# -- 3. memory --------------------------------------------------------------------------------------------------


def rss_bytes() -> int:
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


async def bench_memory(env: Env, iterations: int, runs: int, out: Any) -> None:
    reasoning = "I should call the calculator to be exact. "
    text = "Computing the next value now."
    await set_script(env, tool_turns(iterations, text=text, reasoning=reasoning))
    await run_once(env, stream=False, max_iterations=iterations)  # warm-up: imports, caches, statements
    # RSS, no tracemalloc: one run, then `runs` more (a leak shows as steady growth)
    gc.collect()
    rss0 = rss_bytes()
    maxrss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    run_id, _c, run_s = await run_once(env, stream=False, max_iterations=iterations)
    gc.collect()
    rss1 = rss_bytes()
    n_plain = sum((await count_events(env, run_id)).values())
    for _ in range(runs):
        await run_once(env, stream=False, max_iterations=iterations)
    gc.collect()
    rss2 = rss_bytes()
    maxrss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # tracemalloc: peak of one run, retained after it and after `runs` more
    gc.collect()
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    run_id, _c, traced_s = await run_once(env, stream=False, max_iterations=iterations)
    _cur, peak = tracemalloc.get_traced_memory()
    gc.collect()
    after1, _ = tracemalloc.get_traced_memory()
    for _ in range(runs):
        await run_once(env, stream=False, max_iterations=iterations)
    gc.collect()
    after_n, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    n = sum((await count_events(env, run_id)).values())

    def kib(x: float) -> str:
        return f"{x / 1024:,.1f}"

    def per_k(x: float, events: int) -> str:
        return f"{x * 1000 / events / 1024:,.1f}"

    out.write(
        f"\n## 3. Memory of one run of {iterations} iterations (~7 trace events each; after a warm-up run)\n"
        "| measure | events/run | KiB | KiB per 1,000 events |\n|---|---|---|---|\n"
        f"| tracemalloc peak during one run (above the start) | {n} | {kib(peak - base)} | {per_k(peak - base, n)} |\n"
        f"| tracemalloc retained after it finished (gc) | {n} | {kib(after1 - base)} | {per_k(after1 - base, n)} |\n"
        f"| tracemalloc retained per run over {runs} more runs | {n} | {kib((after_n - after1) / runs)} |"
        f" {per_k((after_n - after1) / runs, n)} |\n"
        f"| RSS delta across one run (no tracemalloc) | {n_plain} | {kib(rss1 - rss0)} |"
        f" {per_k(rss1 - rss0, n_plain)} |\n"
        f"| RSS delta per run over {runs} more runs | {n_plain} | {kib((rss2 - rss1) / runs)} |"
        f" {per_k((rss2 - rss1) / runs, n_plain)} |\n"
        f"| ru_maxrss growth over these {runs + 1} runs | {n_plain} | {maxrss1 - maxrss0:,} | - |\n"
    )
    out.write(
        f"one run {run_s:.2f} s ({run_s / iterations * MS:.2f} ms/iteration; {traced_s:.2f} s under tracemalloc)."
        " tracemalloc counts Python allocations only (not SQLite's page cache); RSS moves in whole pages and the"
        f" allocator keeps freed memory, so small or negative deltas are noise. Process RSS now"
        f" {rss_bytes() / 2**20:.0f} MiB.\n"
    )


# -- profile ----------------------------------------------------------------------------------------------------


async def bench_profile(env: Env, timers: Timers, iterations: int, top: int, out: Any) -> None:
    await set_script(env, tool_turns(iterations))
    await run_once(env, stream=False, max_iterations=iterations)
    timers.reset()
    prof = cProfile.Profile()
    prof.enable()
    _run_id, _c, total = await run_once(env, stream=False, max_iterations=iterations)
    prof.disable()
    stats = pstats.Stats(prof)
    rows = []
    grand = 0.0
    for (file, line, func), (_cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        grand += tt
        if "/sidecar/" in file:
            rows.append((tt, ct, nc, f"{Path(file).relative_to(ROOT)}:{line}({func})"))
    rows.sort(reverse=True)
    out.write(
        f"\n## cProfile of one run, tool only, stream off ({iterations} iterations, {total:.2f} s under the profiler;"
        f" event-loop thread only; {grand:.2f} s of self time in all profiled functions)\n"
        "| self s | cumulative s | calls | function |\n|---|---|---|---|\n"
    )
    for tt, ct, nc, name in rows[:top]:
        out.write(f"| {tt:.3f} | {ct:.3f} | {nc} | {name} |\n")
    by_pkg: dict[str, float] = {}
    for (file, _line, func), (_cc, _nc, tt, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        by_pkg[_bucket(file, func)] = by_pkg.get(_bucket(file, func), 0.0) + tt
    ranked = sorted(by_pkg.items(), key=lambda kv: -kv[1])
    out.write("self time by origin: " + ", ".join(f"{k} {v:.2f} s" for k, v in ranked) + "\n")


def _bucket(file: str, func: str) -> str:
    if "/sidecar/" in file:
        return "sidecar"
    if "epoll" in func or "select" in func:
        return "event-loop wait (epoll)"
    for key in ("pydantic", "anyio", "asyncio", "json", "sqlite3"):
        if key in file or key in func:
            return key
    return "builtins/other"


# -- main -------------------------------------------------------------------------------------------------------


async def bench(args: argparse.Namespace, data_dir: Path) -> None:
    out = sys.stdout
    t_start = time.perf_counter()
    async with environment(data_dir) as env:
        timers = Timers()
        instrument(env, timers)
        out.write(
            f"# Agent runtime benchmark: Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, data dir {data_dir}\n"
        )
        if not args.skip_loop:
            await bench_loop(env, timers, args.iterations, args.repeats, out)
        if not args.skip_trace:
            await bench_trace(env, args.events, args.append_events, args.repeats, out)
        if not args.skip_memory:
            log.info("memory case")
            await bench_memory(env, args.memory_iterations, args.repeats, out)
        if args.profile:
            log.info("profile")
            await bench_profile(env, timers, args.iterations, args.top, out)
    out.write(f"\ntotal bench time {time.perf_counter() - t_start:.1f} s\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=200, help="iterations per loop run (max 200)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--events", type=int, default=20_000, help="events per TraceWriter run")
    parser.add_argument("--append-events", type=int, default=2_000, help="events per EventLog.append run")
    parser.add_argument("--memory-iterations", type=int, default=143, help="~7 events each: ~1,000 events")
    parser.add_argument("--quick", action="store_true", help="smaller runs (a smoke test, not the figures)")
    parser.add_argument("--profile", action="store_true", help="add a cProfile of one loop run")
    parser.add_argument("--top", type=int, default=10, help="functions listed by --profile")
    parser.add_argument("--skip-loop", action="store_true")
    parser.add_argument("--skip-trace", action="store_true")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--data-dir", type=Path, default=None, help="default: a fresh temporary directory")
    parser.add_argument("-v", "--verbose", action="store_true", help="progress on stderr")
    args = parser.parse_args()
    if args.quick:
        args.iterations, args.repeats = min(args.iterations, 50), 3
        args.events, args.append_events = 4_000, 500
    if not 1 < args.iterations <= 200:
        parser.error("--iterations must be 2..200 (agent max_iterations)")
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    log.setLevel(logging.INFO if args.verbose else logging.WARNING)
    if args.data_dir is not None:
        args.data_dir.mkdir(parents=True, exist_ok=True)
        anyio.run(bench, args, args.data_dir)
        return
    with tempfile.TemporaryDirectory(prefix="metona-bench-agent-") as tmp:
        anyio.run(bench, args, Path(tmp))


if __name__ == "__main__":
    main()
