#!/usr/bin/env python3
"""Lines per second through the single stdout writer (``LineWriter``), into a pipe drained by a reader.

    python scripts/bench/bench_writer.py [--lines 1000000]

Goal (issue 2): ≥ 100k lines/s through the writer. Measures (a) the writer alone with pre-serialised
MetonaStreamEvent lines and (b) end to end with the IR serialiser building each line (to_line()),
both into an OS pipe whose other end a thread reads and counts.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sidecar.ipc.stdio import LineWriter
from sidecar.ir import MetonaStreamEvent


def drain(fd: int, counter: list[int]) -> None:
    n = 0
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        n += chunk.count(b"\n")
    counter[0] = n


async def run(lines: int, build: bool) -> tuple[float, int]:
    r, w = os.pipe()
    counter = [0]
    reader = threading.Thread(target=drain, args=(r, counter))
    reader.start()
    writer = LineWriter(w)
    line = MetonaStreamEvent.text_delta(
        request_id="r_1", session_id="s_1", iteration=1, seq=0, timestamp=1719000000000, delta="根据分析，"
    ).to_line()
    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        for seq in range(lines):
            if build:
                ev = MetonaStreamEvent.text_delta(
                    request_id="r_1",
                    session_id="s_1",
                    iteration=1,
                    seq=seq,
                    timestamp=1719000000000,
                    delta="根据分析，",
                )
                await writer.send(ev.to_line())
            else:
                await writer.send(line)
        writer.close()
        await writer.wait_drained()
    os.close(w)
    reader.join()
    os.close(r)
    return time.perf_counter() - start, counter[0]


def main() -> None:
    import argparse as _  # noqa: F401

    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=1_000_000)
    args = parser.parse_args()
    print(f"{'case':<40} {'lines':>10} {'seconds':>8} {'lines/s':>12}")
    for name, build in (("writer, pre-serialised lines", False), ("writer + MetonaStreamEvent.to_line()", True)):
        elapsed, got = anyio.run(run, args.lines, build)
        assert got == args.lines, (got, args.lines)
        print(f"{name:<40} {got:>10} {elapsed:>8.2f} {got / elapsed:>12,.0f}")
    print("goal: ≥ 100,000 lines/s through the writer")


if __name__ == "__main__":
    main()
