#!/usr/bin/env python3
"""How fast ``$/cancelRequest`` on a running ``chat/stream`` hangs up the upstream HTTP request.

    python scripts/bench/bench_chat_cancel.py [--runs 30]

Goal (issue 3): the upstream request is closed within 100 ms of the cancel. A real sidecar process streams
from a loopback OpenAI-compatible server (a chunk every 10 ms); after 5 stream lines the client sends the cancel;
the server notes the moment its socket reports the hang-up (select + MSG_PEEK EOF). Also printed: cancel →
-32800 answer, and the time from sending chat/stream to its first stream line (a first request includes
the lazy httpx import and the connection).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.e2e.test_chat_e2e import ir_request, stream_lines  # noqa: E402
from tests.support.http_stub import Answer, sse, stub_server  # noqa: E402
from tests.support.sidecar_proc import Sidecar  # noqa: E402


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    events = [{"choices": [{"index": 0, "delta": {"content": f"w{i} "}, "finish_reason": None}]} for i in range(2000)]
    hangup: list[float] = []
    answered: list[float] = []
    first_line: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        sc = Sidecar(data, env={"METONA_LOG_LEVEL": "WARNING"})
        try:
            sc.initialize()
            with stub_server() as stub:
                headers = {"content-type": "text/event-stream"}
                sc.result("providers/create", {"preset": "openai", "base_url": stub.url + "/v1", "api_key": "sk-bench"})
                for _ in range(args.runs):
                    stub.disconnected.clear()
                    stub.disconnected_at = None
                    stub.answer("/v1/chat/completions", Answer(200, headers=headers, chunks=sse(*events), delay_s=0.01))
                    sent = time.monotonic()
                    rid = sc.request("chat/stream", {"provider_id": "openai", "request": ir_request("go")})
                    seen: list[object] = []
                    while not stream_lines(seen):
                        seen.append(sc.next())
                    first_line.append(time.monotonic() - sent)
                    while len(stream_lines(seen)) < 5:
                        seen.append(sc.next())
                    cancelled = time.monotonic()
                    sc.notify("$/cancelRequest", {"id": rid})
                    reply = sc.response(rid, collect=seen)
                    answered.append(time.monotonic() - cancelled)
                    assert reply["error"]["code"] == -32800, reply
                    if not stub.disconnected.wait(5) or stub.disconnected_at is None:
                        raise SystemExit("the upstream request was not closed")
                    hangup.append(stub.disconnected_at - cancelled)
        finally:
            sc.close()
    ms = 1000.0
    print(f"runs: {args.runs}")
    print(
        f"cancel -> upstream closed : p50 {pct(hangup, 50) * ms:6.2f} ms  p95 {pct(hangup, 95) * ms:6.2f} ms  "
        f"max {max(hangup) * ms:6.2f} ms   (goal < 100 ms)"
    )
    print(f"cancel -> -32800 answer   : p50 {pct(answered, 50) * ms:6.2f} ms  p95 {pct(answered, 95) * ms:6.2f} ms")
    print(
        f"request -> first line     : first {first_line[0] * ms:6.1f} ms, later p50 "
        f"{statistics.median(first_line[1:] or first_line) * ms:6.2f} ms"
    )


if __name__ == "__main__":
    main()
