#!/usr/bin/env python3
"""Spawn → ``initialize`` result, against the bare start-up import set, measured in one run.

    python scripts/bench/bench_startup.py [--runs 15] [--binary dist/metona-sidecar]

The goal (issue 2): the sidecar's spawn → initialize result ≤ 1.2× a bare process that only imports
the start-up set the card mandates (``python -c "import pydantic, anyio, jsonrpcserver"``).
Runs are interleaved so machine noise hits both sides alike; medians are reported.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INIT = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n'


def time_bare() -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "import pydantic, anyio, jsonrpcserver"], check=True, stderr=subprocess.DEVNULL
    )
    return time.perf_counter() - start


def time_sidecar(cmd: list[str], data_dir: str) -> float:
    env = dict(os.environ, METONA_DATA_DIR=data_dir, METONA_LOG_LEVEL="WARNING")
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=ROOT
    )
    assert proc.stdin and proc.stdout
    proc.stdin.write(INIT)
    proc.stdin.flush()
    line = proc.stdout.readline()
    elapsed = time.perf_counter() - start
    assert json.loads(line)["id"] == 1, line
    proc.stdin.close()
    proc.wait(timeout=10)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--binary", type=Path, default=None, help="also time the PyInstaller binary")
    args = parser.parse_args()
    source_cmd = [sys.executable, "-m", "sidecar"]
    rows: dict[str, list[float]] = {"bare import set": [], "sidecar (source)": []}
    if args.binary:
        rows["sidecar (binary)"] = []
    with tempfile.TemporaryDirectory() as tmp:
        time_sidecar(source_cmd, tmp)  # warm the page cache and .pyc files once
        if args.binary:
            time_sidecar([str(args.binary)], tmp)
        for _ in range(args.runs):
            rows["bare import set"].append(time_bare())
            rows["sidecar (source)"].append(time_sidecar(source_cmd, tmp))
            if args.binary:
                rows["sidecar (binary)"].append(time_sidecar([str(args.binary.resolve())], tmp))
    base = statistics.median(rows["bare import set"])
    print(f"spawn → initialize result, {args.runs} interleaved runs (median / p90), base = bare import set")
    print(f"{'process':<20} {'median ms':>10} {'p90 ms':>8} {'ratio':>7}")
    for name, values in rows.items():
        values.sort()
        med = statistics.median(values)
        p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
        print(f"{name:<20} {med * 1000:>10.0f} {p90 * 1000:>8.0f} {med / base:>6.2f}x")
    print("goal: sidecar (source) ≤ 1.20x; binary start < 2000 ms")


if __name__ == "__main__":
    main()
