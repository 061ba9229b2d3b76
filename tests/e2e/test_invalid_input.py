"""Bad input of every kind gets a clear, typed error, and the process goes on answering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.sidecar_proc import Sidecar

pytestmark = pytest.mark.e2e


def _error(reply: dict) -> tuple[int, str]:
    return reply["error"]["code"], reply["error"]["data"]["code"]


@pytest.mark.parametrize(
    ("raw", "code", "name"),
    [
        (b"{not json\n", -32700, "PARSE_ERROR"),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping"\n', -32700, "PARSE_ERROR"),
        (b"\xff\xfe\xfd\n", -32700, "PARSE_ERROR"),
        (b'{"jsonrpc":"2.0","id":1,"method":"p\xc3\x28ng"}\n', -32700, "PARSE_ERROR"),
        (b"42\n", -32600, "INVALID_REQUEST"),
        (b'"ping"\n', -32600, "INVALID_REQUEST"),
        (b"null\n", -32600, "INVALID_REQUEST"),
        (b'{"jsonrpc":"1.0","id":1,"method":"ping"}\n', -32600, "INVALID_REQUEST"),
        (b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}\n', -32600, "INVALID_REQUEST"),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":5}\n', -32600, "INVALID_REQUEST"),
        (b"[]\n", -32600, "INVALID_REQUEST"),
    ],
)
def test_malformed_lines(ready: Sidecar, raw: bytes, code: int, name: str) -> None:
    ready.send_bytes(raw)
    reply = ready.next()
    assert _error(reply) == (code, name)
    assert reply["id"] is None or reply["id"] == 1
    ready.assert_alive()


def test_unknown_method(ready: Sidecar) -> None:
    reply = ready.call("no/such/method", {})
    assert _error(reply) == (-32601, "METHOD_NOT_FOUND")
    assert reply["error"]["data"]["details"]["method"] == "no/such/method"


def test_bad_params_give_field_paths_and_never_echo_input(ready: Sidecar) -> None:
    secret = "sk-live-THIS-IS-A-SECRET-0123456789"
    reply = ready.call("dev/sleep", {"ms": secret, "api_key": secret})
    assert _error(reply) == (-32602, "VALIDATION_ERROR")
    locs = sorted(tuple(e["loc"]) for e in reply["error"]["data"]["details"]["errors"])
    assert locs == [("api_key",), ("ms",)]
    assert secret not in json.dumps(reply)
    ready.assert_alive()


def test_positional_params_to_an_object_method(ready: Sidecar) -> None:
    reply = ready.call("dev/sleep", [5])
    assert _error(reply) == (-32602, "VALIDATION_ERROR")


def test_missing_params_validate_as_empty_object(ready: Sidecar) -> None:
    reply = ready.call("dev/sleep")
    assert _error(reply) == (-32602, "VALIDATION_ERROR")
    assert reply["error"]["data"]["details"]["errors"][0]["loc"] == ["ms"]


def test_blank_lines_are_ignored(ready: Sidecar) -> None:
    ready.send_bytes(b"\n\r\n   \n")
    ready.assert_alive()


def test_crlf_line_endings_are_accepted(ready: Sidecar) -> None:
    ready.send_bytes(b'{"jsonrpc":"2.0","id":"crlf","method":"ping"}\r\n')
    assert ready.next() == {"jsonrpc": "2.0", "result": {}, "id": "crlf"}


def test_line_over_the_size_limit(data_dir: Path) -> None:
    sc = Sidecar(data_dir, env={"METONA_MAX_LINE_BYTES": "4096"})
    try:
        sc.initialize()
        big = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "dev/echo", "params": {"x": "a" * 10_000}})
        sc.send_bytes(big.encode() + b"\n")
        reply = sc.next()
        assert _error(reply) == (-32600, "REQUEST_TOO_LARGE")
        assert reply["error"]["data"]["details"]["size_bytes"] >= 10_000
        # just under the limit still works
        ok = json.dumps({"jsonrpc": "2.0", "id": 10, "method": "dev/echo", "params": {"x": "b" * 3000}})
        sc.send_bytes(ok.encode() + b"\n")
        assert sc.next()["result"] == {"x": "b" * 3000}
        sc.assert_alive()
    finally:
        sc.close()


def test_deeply_nested_json(ready: Sidecar) -> None:
    depth = 200_000
    ready.send_bytes(b"[" * depth + b"]" * depth + b"\n")
    reply = ready.next()
    assert _error(reply) == (-32700, "PARSE_ERROR")
    ready.assert_alive()
    nested = '{"jsonrpc":"2.0","id":3,"method":"dev/echo","params":{"x":' + "[" * 5000 + "]" * 5000 + "}}"
    ready.send_bytes(nested.encode() + b"\n")
    reply = ready.next()
    assert reply["id"] in (3, None)
    ready.assert_alive()


def test_unicode_round_trips(ready: Sidecar) -> None:
    text = '让我先分析问题的关键点… \u2028 emoji 🎉 nul\u0000 quote" backslash\\'
    assert ready.result("dev/echo", {"t": text}) == {"t": text}


def test_lone_surrogate_does_not_break_the_wire(ready: Sidecar) -> None:
    ready.send_bytes(b'{"jsonrpc":"2.0","id":"s","method":"dev/echo","params":{"t":"\\ud800"}}\n')
    assert ready.next() == {"jsonrpc": "2.0", "result": {"t": "\ud800"}, "id": "s"}


def test_duplicate_in_flight_id_is_refused(ready: Sidecar) -> None:
    ready.request("dev/sleep", {"ms": 30_000}, id="dup")
    ready.send({"jsonrpc": "2.0", "id": "dup", "method": "ping"})
    reply = ready.next()
    assert reply["id"] == "dup"
    assert _error(reply) == (-32600, "DUPLICATE_REQUEST_ID")
    ready.notify("$/cancelRequest", {"id": "dup"})
    assert ready.response("dup")["error"]["code"] == -32800
