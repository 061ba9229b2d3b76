#!/usr/bin/env python3
"""Event-log throughput: single appends, ``append_many`` batches, concurrent appends, cursor reads.

    python scripts/bench/bench_eventlog.py [--events 5000] [--batch 100] [--data-dir DIR]

Uses the production settings (``Database.open``: WAL, synchronous=NORMAL) and prints them. Every
append is a real committed transaction; a live listener is attached during the single-append run so
the publish path is measured too. ``--data-dir`` defaults to a fresh temporary directory (put it on
the disk you care about: tmpfs numbers flatter).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sidecar.storage.sqlite import Database
from sidecar.trace.eventlog import EventLog

PAYLOAD = {"phase": "transcribing", "current": 42, "total": 100, "percent": 42.0, "message": "正在转写音频"}


def rate(n: int, seconds: float) -> str:
    return f"{n / seconds:>10,.0f} events/s  ({n} in {seconds:.2f}s, {seconds / n * 1e6:.0f} µs/event)"


async def bench(data_dir: Path, events: int, batch: int, tasks: int) -> None:
    db = await Database.open(data_dir)
    log = EventLog(db)
    await log.migrate()
    print(f"SQLite {sqlite3.sqlite_version}, file {db.path}")
    print(
        f"journal_mode={await db.pragma('journal_mode')} synchronous={await db.pragma('synchronous')} (1 = NORMAL)"
        f" busy_timeout={await db.pragma('busy_timeout')}ms foreign_keys={await db.pragma('foreign_keys')}"
    )

    # 1. single appends, one transaction each, with a live listener draining
    await log.create_resource("single", "bench")
    async with anyio.create_task_group() as tg:
        listener = log.listen("single", buffer=events + 1)

        async def drain() -> None:
            async for _ in listener:
                pass

        tg.start_soon(drain)
        t0 = time.perf_counter()
        for i in range(events):
            await log.append("single", "Progress", {**PAYLOAD, "current": i})
        dt = time.perf_counter() - t0
        listener.close()
    print(f"append (1 per txn):            {rate(events, dt)}")

    # 2. append_many batches
    await log.create_resource("batched", "bench")
    t0 = time.perf_counter()
    done = 0
    while done < events:
        n = min(batch, events - done)
        await log.append_many("batched", [("Progress", {**PAYLOAD, "current": done + k}) for k in range(n)])
        done += n
    dt = time.perf_counter() - t0
    print(f"append_many (batch {batch:>4}):      {rate(events, dt)}")

    # 3. concurrent single appends from several tasks onto several resources
    per = max(1, events // tasks)
    for t in range(tasks):
        await log.create_resource(f"conc_{t}", "bench")

    async def writer(t: int) -> None:
        for i in range(per):
            await log.append(f"conc_{t}", "Progress", {**PAYLOAD, "current": i})

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for t in range(tasks):
            tg.start_soon(writer, t)
    dt = time.perf_counter() - t0
    print(f"append ({tasks} concurrent tasks):   {rate(per * tasks, dt)}")

    # 4. cursor reads of the batched log
    for page_size in (200, 1000):
        t0 = time.perf_counter()
        after, got = 0, 0
        while True:
            page = await log.read("batched", after, page_size)
            got += len(page.items)
            after = page.next_sequence
            if not page.has_more:
                break
        dt = time.perf_counter() - t0
        print(f"read (pages of {page_size:>4}):         {rate(got, dt)}")

    print(f"integrity_check: {await db.integrity_check()}")
    await db.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=5000)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--data-dir", type=Path, default=None)
    args = ap.parse_args()
    if args.data_dir is not None:
        anyio.run(bench, args.data_dir, args.events, args.batch, args.tasks)
        return
    with tempfile.TemporaryDirectory(prefix="bench_eventlog_") as tmp:
        anyio.run(bench, Path(tmp), args.events, args.batch, args.tasks)


if __name__ == "__main__":
    main()
