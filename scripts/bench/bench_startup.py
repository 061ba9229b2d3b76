#!/usr/bin/env python3
"""Spawn → ``initialize`` result, against the bare start-up import set, measured in one run.

    python scripts/bench/bench_startup.py [--runs 15] [--binary dist/metona/metona-sidecar]

The goal (issue 22): the sidecar's spawn → initialize result ≤ 1.5× a bare ``python -c "import anyio"``
(the event loop library is all that answering needs; the domain layer loads after the answer).
Runs are interleaved so machine noise hits both sides alike; medians are reported.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_binary_start import one_run  # noqa: E402  (same folder; run as a script)


def time_bare() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import anyio"], check=True, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def time_sidecar(cmd: list[str]) -> float:
    """Spawn → the ``initialize`` answer (the same measurement as bench_binary_start.py)."""
    elapsed, _exit, line = one_run(cmd, "initialize", timeout=10)
    assert json.loads(line)["id"] == 1, line
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--binary", type=Path, default=None, help="also time the PyInstaller binary")
    args = parser.parse_args()
    source_cmd = [sys.executable, "-m", "sidecar"]
    rows: dict[str, list[float]] = {"import anyio": [], "sidecar (source)": []}
    if args.binary:
        rows["sidecar (binary)"] = []
    time_sidecar(source_cmd)  # warm the page cache and .pyc files once
    if args.binary:
        time_sidecar([str(args.binary.resolve())])
    for _ in range(args.runs):
        rows["import anyio"].append(time_bare())
        rows["sidecar (source)"].append(time_sidecar(source_cmd))
        if args.binary:
            rows["sidecar (binary)"].append(time_sidecar([str(args.binary.resolve())]))
    base = statistics.median(rows["import anyio"])
    print(f"spawn → initialize result, {args.runs} interleaved runs (median / p90), base = python -c 'import anyio'")
    print(f"{'process':<20} {'median ms':>10} {'p90 ms':>8} {'ratio':>7}")
    for name, values in rows.items():
        values.sort()
        med = statistics.median(values)
        p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
        print(f"{name:<20} {med * 1000:>10.0f} {p90 * 1000:>8.0f} {med / base:>6.2f}x")
    print("goal: sidecar (source) ≤ 1.50x; binary start < 500 ms")


if __name__ == "__main__":
    main()
