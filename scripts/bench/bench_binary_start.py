#!/usr/bin/env python3
"""Median spawn → first-answer time of the sidecar binary (or any command) over N runs.

    .venv/bin/python scripts/bench/bench_binary_start.py [--runs 10] [--method ping] \
        [--cmd dist/metona/metona-sidecar ...]

Each run spawns the command with a fresh --data-dir, writes one JSON-RPC request line, and times until the
first stdout line arrives. Then it closes stdin and also times the exit. Prints one line per run and a summary to
stdout (with the size of the folder the binary runs from: its one-folder bundle, engines left out).
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from sidecar.workers import engines  # noqa: E402


def one_run(cmd: list[str], method: str, timeout: float) -> tuple[float, float, str]:
    with tempfile.TemporaryDirectory(prefix="metona-bench-") as tmp:
        argv = [*cmd, "--data-dir", str(Path(tmp) / "data")]
        request = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": {}}) + "\n"
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=tmp
        )
        assert proc.stdin and proc.stdout
        proc.stdin.write(request)
        proc.stdin.flush()
        line = proc.stdout.readline()
        t_answer = time.perf_counter() - t0
        proc.stdin.close()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        t_exit = time.perf_counter() - t0
        return t_answer, t_exit, line.strip()


def bundle_mib(executable: Path) -> float:
    """The executable plus its one-folder bundle (``_internal/`` beside it; the engines folder is not loaded)."""
    internal = executable.parent / "_internal"
    files = [executable, *(p for p in internal.rglob("*") if p.is_file() and not p.is_symlink())]
    return sum(p.stat().st_size for p in files) / 2**20


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs first (page cache)")
    ap.add_argument("--method", default="ping", help="JSON-RPC method of the single request (default ping)")
    ap.add_argument("--cmd", default=str(ROOT / engines.SHIPPED_BINARY), help="command to spawn (shell-split)")
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args()

    cmd = shlex.split(args.cmd)
    if not Path(cmd[0]).exists():
        print(f"bench_binary_start: {cmd[0]} not found; build it with: bash build/build.sh", file=sys.stderr)
        return 1
    for _ in range(args.warmup):
        one_run(cmd, args.method, args.timeout)
    answers, exits = [], []
    for i in range(args.runs):
        t_answer, t_exit, line = one_run(cmd, args.method, args.timeout)
        try:
            ok = json.loads(line).get("id") == 1
        except ValueError:
            ok = False
        if not ok:
            print(f"run {i + 1}: bad answer {line!r}", file=sys.stderr)
            return 1
        answers.append(t_answer)
        exits.append(t_exit)
        print(f"run {i + 1:2d}: first answer {t_answer:.3f} s, exited {t_exit:.3f} s")
    print(
        f"{cmd[0]} ({bundle_mib(Path(cmd[0])):.0f} MiB): median spawn->first answer {statistics.median(answers):.3f} s "
        f"(min {min(answers):.3f}, max {max(answers):.3f}) over {args.runs} runs; "
        f"median spawn->exit {statistics.median(exits):.3f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
