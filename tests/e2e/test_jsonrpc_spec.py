"""Every example of the JSON-RPC 2.0 specification (section 7), sent verbatim to the real process.

The spec's methods (subtract, sum, update, notify_hello, get_data) are the dev conformance methods.
"No response" is checked by a ping right after: its answer must be the next line.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.sidecar_proc import Sidecar

pytestmark = pytest.mark.e2e


def _err(code: int, id: Any) -> tuple[int, Any]:
    return (code, id)


def _shape(reply: dict[str, Any]) -> Any:
    if "error" in reply:
        return ("error", reply["error"]["code"], reply["id"])
    return ("result", reply["result"], reply["id"])


SINGLE_CASES = [
    ('{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}', ("result", 19, 1)),
    ('{"jsonrpc": "2.0", "method": "subtract", "params": [23, 42], "id": 2}', ("result", -19, 2)),
    (
        '{"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23, "minuend": 42}, "id": 3}',
        ("result", 19, 3),
    ),
    (
        '{"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 42, "subtrahend": 23}, "id": 4}',
        ("result", 19, 4),
    ),
    ('{"jsonrpc": "2.0", "method": "foobar", "id": "1"}', ("error", -32601, "1")),
    ('{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]', ("error", -32700, None)),
    ('{"jsonrpc": "2.0", "method": 1, "params": "bar"}', ("error", -32600, None)),
    (
        '[{"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},{"jsonrpc": "2.0", "method"]',
        ("error", -32700, None),
    ),
    ("[]", ("error", -32600, None)),
]


@pytest.mark.parametrize(("line", "expected"), SINGLE_CASES)
def test_single_examples(ready: Sidecar, line: str, expected: Any) -> None:
    ready.send_bytes(line.encode() + b"\n")
    reply = ready.next()
    assert isinstance(reply, dict)
    assert reply["jsonrpc"] == "2.0"
    assert _shape(reply) == expected
    if "error" in reply:
        assert isinstance(reply["error"]["message"], str)
        assert isinstance(reply["error"]["data"]["code"], str)
    ready.assert_alive()


@pytest.mark.parametrize(
    "line",
    [
        '{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}',
        '{"jsonrpc": "2.0", "method": "foobar"}',
        '[{"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},'
        '{"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}]',
    ],
)
def test_notifications_get_no_answer(ready: Sidecar, line: str) -> None:
    ready.send_bytes(line.encode() + b"\n")
    ready.assert_alive()  # the next line is the ping's answer: nothing was sent for the notification


def test_invalid_batch_of_one(ready: Sidecar) -> None:
    ready.send_bytes(b"[1]\n")
    reply = ready.next()
    assert isinstance(reply, list) and len(reply) == 1
    assert _shape(reply[0]) == ("error", -32600, None)
    ready.assert_alive()


def test_invalid_batch_of_three(ready: Sidecar) -> None:
    ready.send_bytes(b"[1,2,3]\n")
    reply = ready.next()
    assert isinstance(reply, list)
    assert [_shape(r) for r in reply] == [("error", -32600, None)] * 3
    ready.assert_alive()


def test_mixed_batch(ready: Sidecar) -> None:
    ready.send_bytes(
        b"""[
        {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
        {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},
        {"foo": "boo"},
        {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
        {"jsonrpc": "2.0", "method": "get_data", "id": "9"}
    ]""".replace(b"\n", b" ")
        + b"\n"
    )
    reply = ready.next()
    assert isinstance(reply, list)
    assert sorted((_shape(r) for r in reply), key=repr) == sorted(
        [
            ("result", 7, "1"),
            ("result", 19, "2"),
            ("error", -32600, None),
            ("error", -32601, "5"),
            ("result", ["hello", 5], "9"),
        ],
        key=repr,
    )
    ready.assert_alive()


def test_null_id_is_a_request_not_a_notification(ready: Sidecar) -> None:
    ready.send_bytes(b'{"jsonrpc": "2.0", "method": "subtract", "params": [5, 2], "id": null}\n')
    assert _shape(ready.next()) == ("result", 3, None)


def test_request_without_jsonrpc_member_is_invalid(ready: Sidecar) -> None:
    ready.send_bytes(b'{"method": "subtract", "params": [5, 2], "id": 7}\n')
    reply = ready.next()
    assert reply["error"]["code"] == -32600
    ready.assert_alive()


@pytest.mark.parametrize(
    "line",
    [
        '{"jsonrpc": "2.0", "method": "$/cancelRequest", "params": "job_1"}',
        '{"jsonrpc": "2.0", "method": "$/cancelRequest", "params": null, "id": 4}',
        '{"jsonrpc": "2.0", "method": "exit", "params": 7}',
        '{"method": "exit"}',
        '{"jsonrpc": "2.0", "method": "exit", "extra": 1}',
    ],
)
def test_a_control_message_with_an_invalid_envelope_is_an_invalid_request(ready: Sidecar, line: str) -> None:
    """Like any other method's (the spec's ``"params": "bar"`` example): -32600 with id null, and ``exit`` does
    not end the process. The fuzz found the cancel answered nothing (a 'notification' that is not one)."""
    ready.send_bytes(line.encode() + b"\n")
    assert _shape(ready.next()) == ("error", -32600, None)
    ready.assert_alive()
