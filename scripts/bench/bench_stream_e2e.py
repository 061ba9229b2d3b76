#!/usr/bin/env python3
"""End-to-end stream lines/s through the real sidecar process, from a loopback HTTP server.

    .venv/bin/python scripts/bench/bench_stream_e2e.py [--chunks 50000] [--runs 3] [--events-per-chunk 1] [--profile]

Goal (issue 3): ≥ 50k MetonaStreamEvent lines/s on the sidecar's stdout. The chain is the real one: a loopback
HTTP/1.1 server (the conformance suite's, in its own process so that it does not share a GIL with the reader)
streams an OpenAI ``chat.completion.chunk`` SSE body of ``--chunks`` events (``--events-per-chunk`` events per
``sendall``; 1 by default, the worst case: one HTTP chunk per event), the sidecar (``python -m sidecar``, stdio
JSON-RPC) is configured with ``providers/create {preset: "openai", base_url: <loopback>/v1}`` and asked
``chat/stream``; this process reads its stdout and counts stream lines. The rate is stream lines / (last line −
first line); the time to the first line and the whole call are printed too, and before each run the rate of the
source alone (a bare httpx read of the same stream, no sidecar): the ratio is the median of the per-run ratios, so
that the shared machine's noise hits both sides of each alike. ``--profile`` runs the sidecar under cProfile
(build/bench/sidecar-stream.prof) and prints its top functions.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RECORDING = ROOT / "tests" / "providers" / "recordings" / "openai" / "plain_text.yaml"
REQUEST = ROOT / "tests" / "conformance" / "requests" / "plain_chat.yaml"
GOAL_LINES_PER_S = 50_000
GOAL_RATIO = 0.8  # issue 22: the sidecar's stream lines/s ≥ 0.8× the bare httpx read of the same stream


def bench_body(n_chunks: int, per_chunk: int = 1) -> list[bytes]:
    """The recording's events, whole, with its first content event repeated to ``n_chunks`` events, sent
    ``per_chunk`` events per network chunk."""
    sys.path.insert(0, str(ROOT))
    from tests.conformance.loopback import Recording

    body = Recording.load(RECORDING).body.decode()
    events = [e + "\n\n" for e in body.split("\n\n") if e.strip()]
    content = next(e for e in events if '"content":"' in e and '"content":""' not in e)
    head, tail = events[:1], [e for e in events[1:] if '"content":"' not in e]
    events = head + [content] * max(1, n_chunks - len(head) - len(tail)) + tail
    return ["".join(events[i : i + per_chunk]).encode() for i in range(0, len(events), per_chunk)]


def serve(n_chunks: int, answers: int, per_chunk: int) -> None:
    """``--serve``: the loopback server process; prints its URL, serves ``answers`` streams, exits on stdin EOF."""
    sys.path.insert(0, str(ROOT))
    from tests.conformance.loopback import LoopbackServer, Recording

    rec = Recording(
        status=200, headers={"content-type": "text/event-stream"}, chunks=tuple(bench_body(n_chunks, per_chunk))
    )
    with LoopbackServer() as server:
        for _ in range(answers):
            server.answer("/v1/chat/completions", rec)
        print(server.url, flush=True)
        sys.stdin.read()


def source_ceiling(url: str) -> tuple[int, float, float]:
    """(chunks, seconds, CPU seconds): a bare httpx client reading one stream from the loopback server (no sidecar)."""
    import httpx

    with httpx.Client(timeout=60) as client:
        started, cpu = time.perf_counter(), time.process_time()
        n = 0
        with client.stream("POST", url + "/v1/chat/completions", json={}) as response:
            for _chunk in response.iter_raw():
                n += 1
        return n, time.perf_counter() - started, time.process_time() - cpu


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc; 0.0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


_PROFILED = """
import cProfile, logging, os, sys
from sidecar.core.settings import parse_args
settings = parse_args(sys.argv[1:])
logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
from sidecar.app import run
profiler = cProfile.Profile()
profiler.enable()
code = run(settings)
profiler.disable()
profiler.dump_stats({out!r})
os._exit(code)
"""


class Sidecar:
    def __init__(self, data_dir: Path, profile: Path | None = None) -> None:
        env = dict(os.environ, METONA_LOG_LEVEL="WARNING")
        env.pop("METONA_DEV_METHODS", None)
        # python -m sidecar leaves with os._exit (no atexit): profile app.run itself and dump before leaving
        launcher = ["-c", _PROFILED.format(out=str(profile))] if profile else ["-m", "sidecar"]
        cmd = [sys.executable, *launcher, "--data-dir", str(data_dir)]
        cmd += ["--secret-key-file", str(data_dir.parent / "master.key")]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=ROOT
        )
        self._ids = iter(range(1, 1 << 30))
        self._lock = threading.Lock()
        self._answers: dict[int, dict[str, Any]] = {}
        self._arrived = threading.Condition(self._lock)
        self.stream_lines = 0
        self.first_line: float | None = None
        self.last_line: float | None = None
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            if raw.startswith(b'{"jsonrpc"'):
                msg = json.loads(raw)
                if "id" in msg:
                    with self._lock:
                        self._answers[msg["id"]] = msg
                        self._arrived.notify_all()
                continue
            now = time.perf_counter()
            if self.first_line is None:
                self.first_line = now
            self.last_line = now
            self.stream_lines += 1
        with self._lock:
            self._answers[-1] = {"error": "EOF"}
            self._arrived.notify_all()

    def call(self, method: str, params: Any, timeout: float = 120.0) -> dict[str, Any]:
        rid = next(self._ids)
        assert self.proc.stdin is not None
        line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n"
        self.proc.stdin.write(line.encode())
        self.proc.stdin.flush()
        with self._lock:
            if not self._arrived.wait_for(lambda: rid in self._answers or -1 in self._answers, timeout):
                raise TimeoutError(f"{method}: no answer within {timeout} s")
            answer = self._answers.get(rid) or self._answers[-1]
        if "result" not in answer:
            raise RuntimeError(f"{method}: {answer.get('error')}")
        return answer["result"]

    def reset_counts(self) -> None:
        self.stream_lines, self.first_line, self.last_line = 0, None, None

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=50_000, help="SSE events in the stream")
    parser.add_argument("--events-per-chunk", type=int, default=1, help="SSE events per network write (default 1)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="run the sidecar under cProfile and print its top")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.chunks, 2 * args.runs + 1, args.events_per_chunk)
        return

    import yaml

    request = yaml.safe_load(REQUEST.read_text())
    server = subprocess.Popen(
        [
            *(sys.executable, __file__, "--serve", "--chunks", str(args.chunks), "--runs", str(args.runs)),
            *("--events-per-chunk", str(args.events_per_chunk)),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=ROOT,
    )
    assert server.stdout is not None
    url = server.stdout.readline().decode().strip()
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        data_dir.mkdir()
        profile = ROOT / "build" / "bench" / "sidecar-stream.prof" if args.profile else None
        if profile is not None:
            profile.parent.mkdir(parents=True, exist_ok=True)
        sidecar = Sidecar(data_dir, profile)
        try:
            sidecar.call("initialize", {"client_info": {"name": "bench_stream_e2e"}})
            created = sidecar.call(
                "providers/create",
                {"preset": "openai", "base_url": url + "/v1", "api_key": "sk-bench", "default_model": "gpt-4o-mini"},
            )
            provider_id = created["provider_id"]
            print(
                f"sidecar pid {sidecar.proc.pid}, provider {provider_id} → {url}/v1, {args.chunks} SSE events per "
                f"stream, {args.events_per_chunk} per network chunk"
            )
            rates, bare_rates, ratios, cpu_ratios = [], [], [], []
            for run in range(args.runs):
                # the bare read right before each sidecar run: machine noise hits both sides of a ratio alike
                n, seconds, bare_cpu = source_ceiling(url)
                bare = n * args.events_per_chunk / seconds  # the bare read counts network chunks
                bare_rates.append(bare)
                bare_us = bare_cpu / (n * args.events_per_chunk) * 1e6
                print(
                    f"  bare httpx read (no sidecar): {n} network chunks in {seconds:.3f} s = {bare:,.0f} events/s, "
                    f"CPU {bare_us:.1f} µs/event"
                )
                sidecar.reset_counts()
                started, cpu = time.perf_counter(), cpu_seconds(sidecar.proc.pid)
                result = sidecar.call("chat/stream", {"provider_id": provider_id, "request": request})
                ended, cpu = time.perf_counter(), cpu_seconds(sidecar.proc.pid) - cpu
                lines = sidecar.stream_lines
                first, last = sidecar.first_line, sidecar.last_line
                if result.get("error") or first is None or last is None or last <= first:
                    raise RuntimeError(f"run {run}: the stream failed: {result.get('error')}, {lines} lines")
                rate = (lines - 1) / (last - first)
                rates.append(rate)
                ratios.append(rate / bare)
                sidecar_us = cpu / max(lines, 1) * 1e6
                cpu_ratios.append(bare_us / sidecar_us if sidecar_us else 0.0)
                print(
                    f"  run {run + 1}: {lines} lines in {last - first:.3f} s = {rate:,.0f} lines/s; first line "
                    f"after {(first - started) * 1000:.1f} ms; call {ended - started:.3f} s; "
                    f"content {len(result['content'])} chars; ratio {rate / bare:.2f}x; sidecar CPU {sidecar_us:.1f} "
                    f"µs/line"
                )
        finally:
            sidecar.close()
            if server.stdin:
                server.stdin.close()
            server.wait(timeout=10)
        if profile is not None:
            import pstats

            print(
                "cProfile of the sidecar (sorted by own time; the profiler slows it: rates above are not the figures):"
            )
            pstats.Stats(str(profile)).sort_stats("tottime").print_stats(22)
    best, median = max(rates), sorted(rates)[len(rates) // 2]
    verdict = "ok" if best >= GOAL_LINES_PER_S else f"UNDER the {GOAL_LINES_PER_S:,} lines/s goal"
    print(f"best {best:,.0f} lines/s, median {median:,.0f} lines/s ({verdict})")
    ratio = sorted(ratios)[len(ratios) // 2]
    verdict = "ok" if ratio >= GOAL_RATIO else f"UNDER the {GOAL_RATIO}x goal"
    print(
        f"ratio sidecar / bare httpx read (events/s), median of {len(ratios)} interleaved pairs: {ratio:.2f}x "
        f"({verdict}); bare read median {sorted(bare_rates)[len(bare_rates) // 2]:,.0f} events/s"
    )
    # CPU per event does not depend on how busy the machine is: the ratio a CPU-bound sidecar reaches when quiet
    print(f"CPU ratio (bare read µs/event ÷ sidecar µs/line), median: {sorted(cpu_ratios)[len(cpu_ratios) // 2]:.2f}x")


if __name__ == "__main__":
    main()
