#!/usr/bin/env python3
"""``ping`` round trip p50/p99 on an idle sidecar and while another request streams MetonaStreamEvent lines.

    python scripts/bench/bench_ping_under_stream.py [--pings 2000] [--stream-lines 2000000]

Goal (issue 22): ping p99 < 1 ms idle, during a 200 lines/s stream, while 10 MB answers are written and while an
export renders. Issue 33 adds loads that used to be encoded or parsed in one go on the loop: 8 MB base64 (plain
ASCII) answers, float-heavy requests and answers (``dev/echo`` of 300,000 floats) and batches of float echoes —
each with its own floor row (goal: the sidecar's p99 within 2x the floor's).
The stream is the dev method ``dev/stream`` (paced with ``delay_ms``, or unpaced: as fast as the
writer takes lines); the 10 MB answers are ``dev/echo`` calls one after the other (a 10 MB request line in, 10 MB
out) and, the issue's case, ``dev/big_answer`` calls (a small request whose answer is 10 MB); the export is a
Markdown → HTML ``exports/create`` (polled until done), one after the other. Pings are sent one at a time and
timed from write to the matching answer line. The floor is measured in the same run: a minimal asyncio echo
process (``--echo``: the loop's own pipe transports, one answer per line, orjson), idle and carrying the same
10 MB traffic — a ping's answer cannot overtake a line already in the pipe, so that is the pipe's own share.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


ECHO_GOAL_MS = 1.0


def echo_server() -> None:
    """``--echo``: answer every ``{"id": N}`` line with ``{"jsonrpc":"2.0","result":null,"id":N}`` (the floor);
    ``dev/echo`` with its params and ``dev/big_answer`` with its text, as the sidecar does."""
    import asyncio

    import orjson

    def result(message: dict[str, Any]) -> Any:
        params = message.get("params") or {}
        if message.get("method") == "dev/echo":
            return params
        if message.get("method") == "dev/big_answer":
            text = params.get("text", "结果 ")
            return {"text": (text * -(-params["chars"] // len(text)))[: params["chars"]]}
        return None

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=1 << 26)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout)
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        while line := await reader.readline():
            message = orjson.loads(line)
            if isinstance(message, list):  # a batch: one line of answers
                answers = [{"jsonrpc": "2.0", "result": result(m), "id": m["id"]} for m in message]
                writer.write(orjson.dumps(answers) + b"\n")
                continue
            writer.write(orjson.dumps({"jsonrpc": "2.0", "result": result(message), "id": message["id"]}) + b"\n")

    asyncio.run(serve())


BIG_LINE = 1 << 20


def _big_answer(raw: bytes) -> dict[str, Any]:
    """A big answer's id from its tail (``…,"id":N}``, the key order of every answer): parsing 10 MB here would
    hold this process's GIL ~40 ms and delay the pings' timing, for the floor and the sidecar alike."""
    return {"id": json.loads(raw[raw.rindex(b',"id":') + 6 :].rstrip()[:-1]), "result": None}


class Client:
    def __init__(self, data_dir: str, cmd: list[str] | None = None) -> None:
        env = dict(os.environ, METONA_DATA_DIR=data_dir, METONA_DEV_METHODS="1", METONA_LOG_LEVEL="WARNING")
        self.proc = subprocess.Popen(
            cmd or [sys.executable, "-m", "sidecar"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=ROOT,
        )
        self.waiters: dict[Any, threading.Event] = {}
        self.arrived: dict[Any, float] = {}
        self.answers: dict[Any, dict[str, Any]] = {}
        self._send_lock = threading.Lock()
        self.stream_lines = 0
        self.stream_done = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout
        for raw in self.proc.stdout:
            now = time.perf_counter()
            if raw.startswith(b"["):  # a batch's answers: waited for by the last one's id
                tail = raw.rstrip()
                msg = _big_answer(tail[:-1]) if len(raw) >= BIG_LINE else json.loads(raw)[-1]
                if msg.get("id") in self.waiters:
                    self.arrived[msg["id"]] = now
                    self.answers[msg["id"]] = msg
                    self.waiters[msg["id"]].set()
            elif raw.startswith(b'{"jsonrpc"'):
                msg = json.loads(raw) if len(raw) < BIG_LINE else _big_answer(raw)
                rid = msg.get("id")
                if rid == "stream":
                    self.stream_done.set()
                elif rid in self.waiters:
                    self.arrived[rid] = now
                    self.answers[rid] = msg
                    self.waiters[rid].set()
            else:
                self.stream_lines += 1

    def send(self, obj: dict) -> None:
        self.send_raw(json.dumps(obj).encode())

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin
        with self._send_lock:  # the load threads write too
            self.proc.stdin.write(data + b"\n")
            self.proc.stdin.flush()

    def call_raw(self, rid: str, line: bytes) -> None:
        """Send a pre-encoded request (or batch) line whose answer (or last answer) has id ``rid``; wait for it.
        (Encoding 300,000 floats here per call would hold this process's GIL and delay the pings' timing.)"""
        ev = self.waiters[rid] = threading.Event()
        self.send_raw(line)
        if not ev.wait(120):
            raise TimeoutError(f"{rid} not answered")
        del self.waiters[rid]
        self.answers.pop(rid)

    def call(self, rid: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A request from a load thread (string ids: never a ping's), waited for."""
        ev = self.waiters[rid] = threading.Event()
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        if not ev.wait(120):
            raise TimeoutError(f"{method} not answered")
        del self.waiters[rid]
        return self.answers.pop(rid)

    def ping(self, rid: int, method: str = "ping") -> float:
        ev = threading.Event()
        self.waiters[rid] = ev
        start = time.perf_counter()
        self.send({"jsonrpc": "2.0", "id": rid, "method": method})
        if not ev.wait(10):
            raise TimeoutError("ping not answered")
        return self.arrived[rid] - start

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


BIG_TEXT = "结果 " * (10 * 1024 * 1024 // 7)  # 10 MB of UTF-8


def big_echoes(c: Client) -> Callable[[threading.Event], None]:
    """A load: ``dev/echo`` of a 10 MB string, one after the other (the sidecar reads a ~19 MB escaped line, then
    encodes and writes 10 MB per call)."""

    def run(stop: threading.Event) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            c.call(f"big-{n}", "dev/echo", {"text": BIG_TEXT})

    return run


def big_answers(c: Client) -> Callable[[threading.Event], None]:
    """A load: ``dev/big_answer`` of 10 MB, one after the other (a small request, a 10 MB answer: what a big tool
    result costs the sidecar to encode and write)."""

    def run(stop: threading.Event) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            c.call(f"big-{n}", "dev/big_answer", {"chars": len(BIG_TEXT), "text": "结果 "})

    return run


BASE64_TEXT = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
BASE64_CHARS = 8 * 1024 * 1024
FLOATS_PARAMS = json.dumps({"v": [((i * 7919) % 100_003) / 997.0 + 1e-3 for i in range(300_000)]}).encode()
BATCH_FLOATS = json.dumps({"v": [((i * 7919) % 100_003) / 997.0 + 1e-3 for i in range(75_000)]}).encode()


def base64_answers(c: Client) -> Callable[[threading.Event], None]:
    """A load: ``dev/big_answer`` of 8 MB of base64 characters (an ``exports/file`` chunk: plain ASCII)."""

    def run(stop: threading.Event) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            c.call(f"b64-{n}", "dev/big_answer", {"chars": BASE64_CHARS, "text": BASE64_TEXT})

    return run


def _request(rid: str, params: bytes) -> bytes:
    return b'{"jsonrpc":"2.0","id":"' + rid.encode() + b'","method":"dev/echo","params":' + params + b"}"


def float_echoes(c: Client) -> Callable[[threading.Event], None]:
    """A load: ``dev/echo`` of 300,000 floats (~6 MB in, the same out), one after the other."""

    def run(stop: threading.Event) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            c.call_raw(f"fl-{n}", _request(f"fl-{n}", FLOATS_PARAMS))

    return run


def float_batches(c: Client) -> Callable[[threading.Event], None]:
    """A load: batches of 4 ``dev/echo`` of 75,000 floats each, one batch after the other."""

    def run(stop: threading.Event) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            ids = [f"bt-{n}-{i}" for i in range(4)]
            c.call_raw(ids[-1], b"[" + b",".join(_request(rid, BATCH_FLOATS) for rid in ids) + b"]")

    return run


MARKDOWN = "\n\n".join(
    f"## Section {i}\n\nSome *text* with `code` and a [link](https://example.com/{i}).\n\n"
    f"```python\ndef f{i}(x):\n    return [y * {i} for y in range(x)]\n```\n\n| a | b |\n|---|---|\n| {i} | {i * 2} |"
    for i in range(300)
)


def exports_rendering(c: Client) -> Callable[[threading.Event], None]:
    """A load: Markdown → HTML exports (300 sections of text, code and a table), one after the other."""

    def run(stop: threading.Event) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            job = c.call(f"export-{n}", "exports/create", {"source": {"type": "markdown", "markdown": MARKDOWN},
                                                            "format": "html"})["result"]  # fmt: skip
            while not stop.is_set():
                n += 1
                got = c.call(f"export-{n}", "exports/get", {"job_id": job["job_id"]})["result"]
                if got["status"] in ("completed", "failed", "cancelled"):
                    break
                time.sleep(0.02)

    return run


def under_load(c: Client, load: Callable[[threading.Event], None], first_id: int, pings: int) -> list[float]:
    """``pings`` pings while ``load`` runs in a thread (started 0.2 s before the first)."""
    stop = threading.Event()
    thread = threading.Thread(target=load, args=(stop,), daemon=True)
    thread.start()
    time.sleep(0.2)  # the first one is under way
    busy = [c.ping(first_id + i) for i in range(pings)]
    stop.set()
    thread.join(120)
    return busy


BIG_LOADS = (
    ("10 MB echoes (in and out)", big_echoes),
    ("10 MB answers, small asks", big_answers),
    ("8 MB base64 answers", base64_answers),
    ("300k-float echoes (in and out)", float_echoes),
    ("batches of 4 float echoes", float_batches),
)


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pings", type=int, default=2000)
    parser.add_argument("--stream-lines", type=int, default=2_000_000)
    parser.add_argument("--echo", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--only-big", action="store_true", help="the big-load rows only (no export, no streams)")
    args = parser.parse_args()
    if args.echo:
        echo_server()
        return
    with tempfile.TemporaryDirectory() as tmp:
        echo = Client(tmp, [sys.executable, __file__, "--echo"])
        echo.ping(1)
        floor = [echo.ping(10 + i) for i in range(args.pings)]
        floor_rows = [
            (f"floor: {name}", under_load(echo, load(echo), 300_000 + k * 10_000, args.pings), 0, 1.0)
            for k, (name, load) in enumerate(BIG_LOADS)
        ]
        echo.close()
        c = Client(tmp)
        c.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
        c.ping(1, "dev/echo")  # answers once the domain layer has loaded: "idle" means idle
        quiet = [c.ping(10 + i) for i in range(args.pings)]
        rows = [("asyncio echo (floor)", floor, 0, 1.0), ("idle sidecar", quiet, 0, 1.0)]
        for k, (name, load) in enumerate(BIG_LOADS):
            rows.append(floor_rows[k])
            rows.append((name, under_load(c, load(c), 200_000 + len(rows) * 10_000, args.pings), 0, 1.0))
        if not args.only_big:
            rows.append(("an export rendering", under_load(c, exports_rendering(c), 200_000, args.pings), 0, 1.0))
        for name, params in (
            ()
            if args.only_big
            else (
                ("stream 200 lines/s", {"count": args.pings * 10, "delay_ms": 5}),
                ("paced stream (1 ms/line)", {"count": args.pings * 10, "delay_ms": 1}),
                ("max-rate stream", {"count": args.stream_lines}),
            )
        ):
            c.stream_done.clear()
            c.stream_lines = 0
            c.send({"jsonrpc": "2.0", "id": "stream", "method": "dev/stream", "params": {**params, "text": "流式"}})
            while c.stream_lines < 100:
                time.sleep(0.001)
            busy: list[float] = []
            start_lines = c.stream_lines
            t0 = time.perf_counter()
            for i in range(args.pings):
                if c.stream_done.is_set():
                    break
                busy.append(c.ping(100_000 + len(rows) * 10_000 + i))
            elapsed = time.perf_counter() - t0
            rows.append((name, busy, c.stream_lines - start_lines, elapsed))
            c.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": "stream"}})
            c.stream_done.wait(120)
        c.close()
    print("ping round trip over real stdio (ms)")
    print(f"{'condition':<40} {'n':>6} {'p50':>7} {'p99':>7} {'max':>7} {'stream lines/s':>15}")
    for name, vals, streamed, elapsed in rows:
        rate = f"{streamed / elapsed:,.0f}" if streamed else "-"
        print(
            f"{name:<40} {len(vals):>6} {statistics.median(vals) * 1e3:>7.3f} {pct(vals, 0.99) * 1e3:>7.3f}"
            f" {max(vals) * 1e3:>7.3f} {rate:>15}"
        )
    print(f"goal: p99 < {ECHO_GOAL_MS:g} ms idle and during the 200 lines/s stream")


if __name__ == "__main__":
    main()
