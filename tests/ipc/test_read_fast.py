"""Request lines are read with orjson where its reading is the json module's (issue 22), else with the json module."""

from __future__ import annotations

import pytest

from sidecar.ipc.dispatcher import _UNREAD, _read_fast
from sidecar.ipc.early import parse_json


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
        b' {"a":1,"a":2} ',  # duplicate keys: the last wins
        '{"text":"结果 \\u7ed3 😀 \\n \\"q\\""}'.encode(),
        b'[{"id":-0},{"id":9223372036854775807},{"id":-9223372036854775808},{"id":18446744073709551615}]',
        b'{"deep":[[[[{"x":[true,false,null]}]]]]}',
        b'"just a string"',
        b"null",
    ],
)
def test_orjson_reads_what_the_json_module_reads(line: bytes) -> None:
    fast = _read_fast(line)
    assert fast is not _UNREAD
    assert fast == parse_json(line.decode())
    assert repr(fast) == repr(parse_json(line.decode()))  # same types too (ints stay ints)


@pytest.mark.parametrize(
    "line",
    [
        b'{"id":18446744073709551616}',  # orjson: a float; the json module: an int
        b'{"temperature":0.7}',
        b'{"x":1e400}',
        b'{"x":NaN}',
        b'{"s":"\\ud800"}',  # a lone surrogate: the json module reads it, the dispatcher refuses it later
        b"\xef\xbb\xbf{}",
        b'{"bad utf-8":"\xff"}',
        b"[" * 2000 + b"]" * 2000,
        b"{not json",
    ],
)
def test_the_rest_is_left_to_the_json_module(line: bytes) -> None:
    assert _read_fast(line) is _UNREAD
