"""The first request answered before the event loop (issue 22): the same answer as the dispatcher's, anything
else handed over byte for byte, and nothing heavy imported on the way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sidecar.core.settings import Settings
from sidecar.ipc.dispatcher import Dispatcher, encode_answer
from sidecar.ipc.early import FirstRequest, ServerInfo, answer_first
from sidecar.ipc.lifecycle import Lifecycle
from sidecar.ipc.router import Router
from sidecar.ipc.stdio import LineWriter

ROOT = Path(__file__).resolve().parents[2]
COMPONENTS = {"lancedb": {"available": True, "version": "1"}, "math": {"available": False, "detail": "流式 x"}}


def _info(max_line_bytes: int = 4096) -> ServerInfo:
    return ServerInfo("metona-sidecar", "9.9.9", "1.0", "/data/目录", max_line_bytes, lambda: COMPONENTS)


def _stopped(signum: int) -> None:
    raise AssertionError(f"signal {signum}")


def _run(data: bytes, *, close: bool = True, info: ServerInfo | None = None) -> tuple[FirstRequest, bytes]:
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    os.write(in_w, data)
    if close:
        os.close(in_w)
    try:
        first = answer_first(in_r, out_w, info or _info(), wait_s=0.2, on_stop=_stopped)
    finally:
        os.close(out_w)
        os.close(in_r)
        if not close:
            os.close(in_w)
    with os.fdopen(out_r, "rb") as f:
        return first, f.read()


async def _dispatcher_answer(line: bytes) -> bytes:
    """What the lifecycle method answers through the dispatcher for the same line."""
    r, w = os.pipe()
    os.close(r)
    dispatcher = Dispatcher(Router(), LineWriter(w))
    info = _info()
    lifecycle = Lifecycle(
        dispatcher,
        info,
    )
    dispatcher.add_raw_methods(lifecycle.raw_methods(), direct=True)
    response, _ctx = await dispatcher.handle_message(json.loads(line))
    os.close(w)
    return encode_answer(response) + b"\n"


@pytest.mark.anyio
@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"process_id":4242,"client_info":{"name":"x"}}}',
        b'{"jsonrpc":"2.0","id":"a\xe6\xb5\x81","method":"initialize"}',
        b'{"method":"initialize","id":7,"jsonrpc":"2.0","params":{"capabilities":{},"extra":1}}\r',
    ],
)
async def test_initialize_is_answered_with_the_dispatchers_bytes(line: bytes) -> None:
    first, out = _run(line + b'\n{"jsonrpc":"2.0","id":2,"method":"ping"}\n{"partial')
    assert first.initialized
    assert first.pending == b'{"jsonrpc":"2.0","id":2,"method":"ping"}\n{"partial'
    assert first.process_id == json.loads(line).get("params", {}).get("process_id")
    assert out == await _dispatcher_answer(line)


@pytest.mark.parametrize(
    "data",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n',  # another method first
        b'{"jsonrpc":"2.0","method":"initialize"}\n',  # a notification
        b'{"jsonrpc":"2.0","id":null,"method":"initialize"}\n',
        b'{"jsonrpc":"2.0","id":1.5,"method":"initialize"}\n',
        b'{"jsonrpc":"2.0","id":true,"method":"initialize"}\n',
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"process_id":"1"}}\n',  # invalid params
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":[]}\n',
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","extra":1}\n',
        b'{"jsonrpc":"1.0","id":1,"method":"initialize"}\n',
        b'[{"jsonrpc":"2.0","id":1,"method":"initialize"}]\n',  # a batch
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":NaN}}\n',  # not strict JSON
        b"\xff\n",
        b"\n",
        b'{"jsonrpc":"2.0","id":1,"method":"initialize"',  # EOF before the newline
        b"",
    ],
)
def test_anything_else_is_handed_over_untouched(data: bytes) -> None:
    first, out = _run(data)
    assert first == FirstRequest(pending=data) and out == b""


def test_a_line_over_the_limit_is_left_to_the_splitter() -> None:
    line = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"' + b"x" * 2000 + b'"}}\n'
    first, out = _run(line, info=_info(max_line_bytes=1024))
    assert first == FirstRequest(pending=line) and out == b""


def test_a_first_line_that_does_not_arrive_in_time_is_left_to_the_loop() -> None:
    first, out = _run(b'{"jsonrpc":"2.0","id":1,', close=False)
    assert first == FirstRequest(pending=b'{"jsonrpc":"2.0","id":1,') and out == b""


def test_answering_initialize_imports_nothing_heavy(tmp_path: Path) -> None:
    """What runs before the answer (settings, the early path, the components) stays off the event loop library,
    logging, argparse and the domain layer: the start's budget (≤ 1.5x `import anyio`) depends on it."""
    code = (
        "import sys\n"
        "from sidecar.core.settings import parse_args\n"
        "from sidecar.system.capabilities import server_info\n"
        f"server_info(parse_args(['--data-dir', {str(tmp_path)!r}])).components()\n"
        "heavy = ['anyio', 'asyncio', 'logging', 'argparse', 'shutil', 'hashlib', 'pydantic', 'pydantic_core',"
        " 'jsonrpcserver', 'sidecar.ipc.dispatcher', 'sidecar.wiring']\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("METONA_")}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]", out.stderr


def test_the_settings_read_without_argparse_are_the_ones_argparse_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    from sidecar.core import settings as s

    monkeypatch.setenv("METONA_MAX_LINE_BYTES", "5000")
    monkeypatch.setenv("METONA_DEV_METHODS", "1")
    for argv in (
        [],
        ["--data-dir", "/d", "--secret-key-file=/k"],
        ["--log-level", "debug", "--max-line-bytes", "2048", "--parent-pid=12", "--development"],
        ["--data-dir=", "--dev-methods", "--data-dir", "/again"],
    ):
        plain = s._plain_args(argv)
        assert plain is not None and plain == s._argparse_args(argv), argv
    for argv in (["--data", "/d"], ["-h"], ["--version"], ["--max-line-bytes", "12"], ["--parent-pid", "x"],
                 ["--dev-methods=1"], ["--data-dir"], ["--data-dir", "--development"], ["x"]):  # fmt: skip
        assert s._plain_args(argv) is None, argv
    assert s.parse_args(["--data", "/d"]) == s.parse_args(["--data-dir", "/d"])  # an abbreviation: argparse's
    assert isinstance(s.parse_args([]), Settings)


@pytest.mark.skipif(os.name != "posix", reason="off POSIX it is shutil.which itself")
@pytest.mark.parametrize("path", [None, "", ":/usr/bin", "/nonexistent:/bin:/usr/bin", os.environ.get("PATH", "")])
def test_which_finds_what_shutil_finds(monkeypatch: pytest.MonkeyPatch, path: str | None) -> None:
    import shutil

    from sidecar.system.capabilities import which

    if path is None:
        monkeypatch.delenv("PATH", raising=False)
    else:
        monkeypatch.setenv("PATH", path)
    for name in ("ls", "sh", "python3", "no-such-program", "/bin/sh", "/etc/hostname", "/usr", "./x"):
        assert which(name) == shutil.which(name), (name, path)
