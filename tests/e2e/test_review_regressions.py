"""Regressions found by review: input after exit, a host that stops reading, non-JSON numbers,
invalid requests before initialize, huge batches, answers JSON cannot carry, odd ids."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.sidecar_proc import ROOT, Sidecar, sidecar_cmd

pytestmark = pytest.mark.e2e


def test_input_after_exit_is_dropped_not_fatal(sidecar: Sidecar) -> None:
    sidecar.initialize()
    sidecar.send_bytes(
        b'{"jsonrpc":"2.0","id":"a","method":"dev/sleep","params":{"ms":5000}}\n'
        b'{"jsonrpc":"2.0","id":"p","method":"ping"}\n'
        b'{"jsonrpc":"2.0","method":"exit"}\n'
        b'{"jsonrpc":"2.0","id":"c","method":"ping"}\n\n'
    )
    assert sidecar.response("a")["error"]["code"] == -32800
    assert sidecar.wait() == 1  # exit without shutdown
    assert "Traceback" not in sidecar.stderr_text()


def test_trailing_line_after_shutdown_and_exit(sidecar: Sidecar) -> None:
    sidecar.initialize()
    sidecar.send_bytes(b'{"jsonrpc":"2.0","id":1,"method":"shutdown"}\n{"jsonrpc":"2.0","method":"exit"}\n\n')
    assert sidecar.response(1)["result"] is None
    assert sidecar.wait() == 0


def test_exit_sent_as_a_request_is_answered(ready: Sidecar) -> None:
    ready.result("shutdown")
    assert ready.call("exit")["result"] is None
    assert ready.wait() == 0


def test_a_host_that_stops_reading_cannot_keep_the_process_alive(data_dir: Path) -> None:
    env = dict(os.environ, METONA_DATA_DIR=str(data_dir), METONA_DEV_METHODS="1")
    proc = subprocess.Popen(
        sidecar_cmd(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=ROOT,
        start_new_session=True,
    )
    assert proc.stdin and proc.stdout
    proc.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"initialize"}\n')
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 1
    big = json.dumps({"x": "z" * 500_000})
    for i in range(3):
        proc.stdin.write(f'{{"jsonrpc":"2.0","id":{i + 2},"method":"dev/echo","params":{big}}}\n'.encode())
    proc.stdin.write(b'{"jsonrpc":"2.0","id":9,"method":"dev/stream","params":{"count":1000000}}\n')
    proc.stdin.flush()
    time.sleep(1.0)  # let the pipe fill up: nobody reads stdout any more
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"jsonrpc":"2.0","method":"ping","id":NaN}\n',
        b'{"jsonrpc":"2.0","method":"ping","id":Infinity}\n',
        b'{"jsonrpc":"2.0","method":"ping","id":-Infinity}\n',
        b'{"jsonrpc":"2.0","method":"ping","id":1e400}\n',
        b'{"jsonrpc":"2.0","method":"subtract","params":[1e999,1],"id":1}\n',
    ],
)
def test_non_json_numbers_are_parse_errors(ready: Sidecar, raw: bytes) -> None:
    ready.send_bytes(raw)
    reply = ready.next()
    assert reply["error"]["code"] == -32700 and reply["id"] is None
    ready.assert_alive()


def test_an_answer_json_cannot_carry_becomes_an_internal_error(ready: Sidecar) -> None:
    rid = ready.request("dev/sleep", {"ms": 2000})
    overflow = ready.call("subtract", [1e308, -1e308])  # inf: not JSON
    assert overflow["error"]["code"] == -32603
    nines = b"9" * 4300  # parses (the limit is 4300 digits); the sum has 4301 digits and cannot be written
    ready.send_bytes(b'{"jsonrpc":"2.0","id":"big","method":"sum","params":[' + nines + b"," + nines + b"]}\n")
    assert ready.response("big")["error"]["code"] == -32603
    assert ready.response(rid)["result"] == {"slept_ms": 2000}


@pytest.mark.parametrize(
    "raw",
    [
        b'{"method":"foo","id":1}\n',
        b'{"jsonrpc":"1.0","method":"foo","id":1}\n',
        b'{"jsonrpc":"2.0","method":7,"id":1}\n',
    ],
)
def test_invalid_requests_before_initialize_are_answered_at_once(sidecar: Sidecar, raw: bytes) -> None:
    sidecar.send_bytes(raw)
    reply = sidecar.next(timeout=5)
    assert reply["error"]["code"] == -32600


def test_object_ids_are_invalid_and_never_echoed(sidecar: Sidecar) -> None:
    sidecar.send_bytes(b'{"jsonrpc":"2.0","method":"dev/sleep","id":{"api_key":"sk-SECRET-123"}}\n')
    reply = sidecar.next()
    assert reply["error"]["code"] == -32600 and reply["id"] is None
    assert "sk-SECRET" not in json.dumps(reply)


def test_cancel_sent_as_a_request_before_initialize(sidecar: Sidecar) -> None:
    reply = sidecar.call("$/cancelRequest", {"id": 5})
    assert reply["error"]["code"] == -32002


def test_batches_over_the_limit_are_refused(ready: Sidecar) -> None:
    batch = [{"jsonrpc": "2.0", "id": i, "method": "sum", "params": [1, 2]} for i in range(10_001)]
    ready.send(batch)
    reply = ready.next(timeout=30)
    assert reply["error"]["code"] == -32600 and reply["error"]["data"]["code"] == "BATCH_TOO_LARGE"
    ready.assert_alive()


def test_control_is_served_while_a_big_batch_runs(ready: Sidecar) -> None:
    batch = [{"jsonrpc": "2.0", "id": i, "method": "sum", "params": [1, 2]} for i in range(10_000)]
    ready.send(batch)
    ready.send({"jsonrpc": "2.0", "id": "p", "method": "ping"})
    seen: list = []
    assert ready.response("p", timeout=60, collect=seen)["result"] == {}
    if not seen:
        answers = ready.next(timeout=60)
    else:
        answers = seen[0]
    assert len(answers) == 10_000 and all(a["result"] == 3 for a in answers)
