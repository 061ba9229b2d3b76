"""Cancellation and the control lane: ping, cancel and shutdown are served while work runs."""

from __future__ import annotations

import time

import pytest

from tests.support.sidecar_proc import Sidecar

pytestmark = pytest.mark.e2e


def test_cancel_request_answers_minus_32800(ready: Sidecar) -> None:
    rid = ready.request("dev/sleep", {"ms": 60_000})
    ready.assert_alive()
    start = time.monotonic()
    ready.notify("$/cancelRequest", {"id": rid})
    reply = ready.response(rid)
    assert time.monotonic() - start < 2
    assert reply["error"]["code"] == -32800
    assert reply["error"]["data"]["code"] == "REQUEST_CANCELLED"
    ready.assert_alive()


def test_cancel_with_string_id_does_not_hit_numeric_id(ready: Sidecar) -> None:
    num = ready.request("dev/sleep", {"ms": 300}, id=7)
    ready.notify("$/cancelRequest", {"id": "7"})
    assert ready.response(num)["result"] == {"slept_ms": 300}


def test_cancel_of_unknown_or_finished_id_is_ignored(ready: Sidecar) -> None:
    ready.notify("$/cancelRequest", {"id": "never-sent"})
    ready.notify("$/cancelRequest", {})
    ready.notify("$/cancelRequest", "garbage")
    ready.assert_alive()


def test_cancel_sent_as_request_is_answered(ready: Sidecar) -> None:
    rid = ready.request("dev/sleep", {"ms": 60_000})
    reply = ready.call("$/cancelRequest", {"id": rid})
    assert reply["result"] is None
    assert ready.response(rid)["error"]["code"] == -32800


def test_cancel_inside_a_batch(ready: Sidecar) -> None:
    rid = ready.request("dev/sleep", {"ms": 60_000})
    ready.send(
        [
            {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": rid}},
            {"jsonrpc": "2.0", "id": "b1", "method": "ping"},
        ]
    )
    seen: list = []
    reply = ready.response(rid, collect=seen)
    assert reply["error"]["code"] == -32800


def test_ping_is_answered_while_requests_run(ready: Sidecar) -> None:
    slow = [ready.request("dev/sleep", {"ms": 2_000}) for _ in range(20)]
    for _ in range(20):
        start = time.monotonic()
        ready.assert_alive()
        assert time.monotonic() - start < 1.0
    for rid in slow:
        assert ready.response(rid)["result"] == {"slept_ms": 2000}


def test_control_lane_under_a_heavy_stream(ready: Sidecar) -> None:
    count = 200_000
    rid = ready.request("dev/stream", {"count": count, "text": "流"})
    stream_lines: list = []
    pings = [ready.request("ping") for _ in range(50)]
    answered = {}
    deadline = time.monotonic() + 60
    final = None
    while (final is None or len(answered) < len(pings)) and time.monotonic() < deadline:
        value = ready.next(timeout=30)
        if isinstance(value, dict) and "jsonrpc" in value:
            if value.get("id") == rid:
                final = value
            else:
                answered[value["id"]] = value
        else:
            stream_lines.append(value)
    assert final is not None and final["result"] == {"count": count}
    assert sorted(answered) == sorted(pings)
    # the stream: bare objects, seq 0..count then one done, never a jsonrpc key
    assert len(stream_lines) == count + 1
    assert [line["seq"] for line in stream_lines] == list(range(count + 1))
    assert stream_lines[-1]["type"] == "done"
    assert all("jsonrpc" not in line for line in stream_lines[:10])


def test_shutdown_cancels_running_work(ready: Sidecar) -> None:
    rid = ready.request("dev/sleep", {"ms": 60_000})
    ready.assert_alive()
    seen: list = []
    shut = ready.response(ready.request("shutdown"), collect=seen)
    assert shut["result"] is None
    cancelled = [v for v in seen if isinstance(v, dict) and v.get("id") == rid]
    if not cancelled:
        cancelled = [ready.response(rid)]
    assert cancelled[0]["error"]["code"] == -32800
    ready.notify("exit")
    assert ready.wait() == 0
