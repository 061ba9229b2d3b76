"""initialize / shutdown / exit, EOF, parent death, children stopped on the way out."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from sidecar import PROTOCOL_VERSION, SERVER_NAME, __version__
from tests.support.sidecar_proc import Sidecar

pytestmark = pytest.mark.e2e


def test_requests_before_initialize_answer_not_initialized(sidecar: Sidecar) -> None:
    reply = sidecar.call("dev/sleep", {"ms": 0})
    assert reply["error"]["code"] == -32002
    assert reply["error"]["data"]["code"] == "NOT_INITIALIZED"
    # ping is served before initialize; a notification before initialize is dropped silently
    sidecar.notify("dev/sleep", {"ms": 0})
    sidecar.assert_alive()


def test_initialize_reports_server_and_components(sidecar: Sidecar, data_dir: Path) -> None:
    result = sidecar.initialize()
    assert result["server_info"] == {"name": SERVER_NAME, "version": __version__}
    assert result["protocol_version"] == PROTOCOL_VERSION
    assert Path(result["data_dir"]) == data_dir.resolve()
    caps = result["capabilities"]
    assert caps["stream_events"] is True
    assert caps["limits"]["max_line_bytes"] > 0
    components = caps["components"]
    for name in (
        "lancedb",
        "mcp",
        "chromium",
        "faster_whisper",
        "pyannote_audio",
        "diarization_weights",
        "whisper_model",
    ):
        assert isinstance(components[name]["available"], bool), name
    # media: each component says whether it is there and, when not, why (e.g. a binary without its engines)
    for name in ("transcription", "diarization"):
        assert isinstance(components[name]["available"], bool), name
        assert components[name]["available"] or components[name]["detail"], name
    for sub in ("lancedb", "attachments", "exports", "plugins", "themes", "models", "datasets"):
        assert (data_dir / sub).is_dir()


def test_initialize_twice_is_a_conflict(ready: Sidecar) -> None:
    reply = ready.call("initialize", {})
    assert reply["error"]["code"] == 409
    assert reply["error"]["data"]["code"] == "ALREADY_INITIALIZED"


def test_shutdown_then_exit_exits_zero(ready: Sidecar) -> None:
    assert ready.result("shutdown") is None
    after = ready.call("dev/sleep", {"ms": 0})
    assert after["error"]["code"] == -32600
    assert after["error"]["data"]["code"] == "SHUTTING_DOWN"
    ready.notify("exit")
    assert ready.wait() == 0


def test_exit_without_shutdown_exits_one(ready: Sidecar) -> None:
    ready.notify("exit")
    assert ready.wait() == 1


def test_stdin_eof_exits_zero(ready: Sidecar) -> None:
    ready.close_stdin()
    assert ready.wait() == 0


def test_eof_cancels_running_requests_and_still_answers_them(ready: Sidecar) -> None:
    rid = ready.request("dev/sleep", {"ms": 60_000})
    ready.assert_alive()
    ready.close_stdin()
    reply = ready.response(rid)
    assert reply["error"]["code"] == -32800
    assert ready.wait() == 0


def test_children_are_stopped_on_exit(ready: Sidecar) -> None:
    pid = ready.result("dev/spawn", {"seconds": 120})["pid"]
    os.kill(pid, 0)  # alive
    ready.result("shutdown")
    ready.notify("exit")
    assert ready.wait() == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_children_are_stopped_on_eof(ready: Sidecar) -> None:
    pid = ready.result("dev/spawn", {"seconds": 120})["pid"]
    ready.close_stdin()
    assert ready.wait() == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_exits_when_the_watched_parent_dies(data_dir: Path) -> None:
    parent = subprocess.Popen(["sleep", "60"])
    sc = Sidecar(data_dir, args=["--parent-pid", str(parent.pid)])
    try:
        sc.initialize()
        parent.kill()
        parent.wait()
        start = time.monotonic()
        assert sc.wait(timeout=10) == 0
        assert time.monotonic() - start < 5
    finally:
        sc.close()


def test_exits_when_host_pid_from_initialize_dies(data_dir: Path) -> None:
    host = subprocess.Popen(["sleep", "60"])
    sc = Sidecar(data_dir)
    try:
        sc.result("initialize", {"process_id": host.pid})
        host.kill()
        host.wait()
        assert sc.wait(timeout=10) == 0
    finally:
        sc.close()


def test_stray_print_goes_to_stderr_not_the_wire(ready: Sidecar) -> None:
    assert ready.result("dev/print", {"text": "STRAY-PRINT-MARKER"}) == {"printed": True}
    ready.assert_alive()
    ready.close_stdin()
    ready.wait()
    assert all(b"STRAY-PRINT-MARKER" not in line for line in ready.raw_lines)
    assert "STRAY-PRINT-MARKER" in ready.stderr_text()


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_termination_signals_exit_cleanly_and_stop_children(ready: Sidecar, signame: str) -> None:
    pid = ready.result("dev/spawn", {"seconds": 120})["pid"]
    rid = ready.request("dev/sleep", {"ms": 60_000})
    ready.assert_alive()
    ready.proc.send_signal(getattr(signal, signame))
    assert ready.response(rid)["error"]["code"] == -32800  # still answered on the way out
    assert ready.wait() == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_requests_sent_with_initialize_wait_for_the_domain_layer(sidecar: Sidecar) -> None:
    """initialize is answered before the event loop (issue 22); the lines after it in the same write are served
    by the dispatcher, and a domain method among them waits for the domain layer instead of being unknown."""
    sidecar.send_bytes(
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"client_info":{"name":"t"}}}\n'
        b'{"jsonrpc":"2.0","id":2,"method":"providers/list"}\n'
        b'{"jsonrpc":"2.0","id":3,"method":"ping"}\n'
        b'{"jsonrpc":"2.0","id":4,"method":"initialize"}\n'
    )
    assert sidecar.response(1)["result"]["server_info"]["name"] == SERVER_NAME
    others: list[dict[str, Any]] = []
    assert sidecar.response(2, timeout=30, collect=others)["result"] == {"items": []}
    while len(others) < 2:
        others.append(sidecar.next())
    by_id = {m["id"]: m for m in others}
    assert by_id[3]["result"] == {}
    assert by_id[4]["error"]["data"]["code"] == "ALREADY_INITIALIZED"
