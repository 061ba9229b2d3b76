"""Issue 33 §4: no answer blocks the wire, whatever it holds. A big answer — a plain ASCII/base64 string (an
``exports/file`` chunk), floats, more nodes than orjson's check walks, a batch — is encoded with the loop let in
every :data:`WORK_PER_TURN` of work, byte for byte what the one-go encoder writes; a request line holding floats is
read by orjson (the json module read 300,000 floats on the loop in ~380 ms), to the same values and types.
Counting the encoder's checkpoints keeps this deterministic (the timing is scripts/bench/bench_ping_under_stream.py).
"""

from __future__ import annotations

import base64
import json
import random
from typing import Any

import anyio
import pytest

from sidecar.ipc import dispatcher
from sidecar.ipc.dispatcher import _UNREAD, _read_line, encode_answer, encode_answer_async
from sidecar.ipc.early import encode, parse_json

rng = random.Random(33)
FLOATS = [rng.random() * 10 ** rng.randint(-20, 15) for _ in range(60_000)] + [1e16, -0.0, 1e-7, 5e-324]


def _answer(result: Any, rid: Any = "r-1") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "result": result, "id": rid}


LOADS = {
    "base64": _answer({"data_b64": base64.b64encode(rng.randbytes(3 * 1024 * 1024)).decode()}),  # 4 MiB, ASCII
    "ascii": _answer({"text": "plain text line\n" * 300_000}),
    "floats": _answer({"embedding": FLOATS, "n": 1}),
    "nodes": _answer({"ids": list(range(100_000)), "names": [f"n{i}" for i in range(30_000)]}),
    "batch": [_answer({"v": FLOATS[:20_000]}, i) for i in range(4)],
    "mixed": _answer([{"score": x, "id": i, "tags": ["a", "é"]} for i, x in enumerate(FLOATS[:8_000])]),
}


@pytest.fixture
def turns(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    counted: list[int] = []
    real = anyio.lowlevel.checkpoint

    async def checkpoint() -> None:
        counted.append(1)
        await real()

    monkeypatch.setattr(dispatcher.anyio.lowlevel, "checkpoint", checkpoint)
    return counted


@pytest.mark.anyio
@pytest.mark.parametrize("name", list(LOADS))
async def test_a_big_answer_of_any_content_lets_the_loop_in(name: str, turns: list[int]) -> None:
    answer = LOADS[name]
    whole = encode_answer(answer)
    assert whole == encode(answer)
    assert await encode_answer_async(answer) == whole  # byte for byte
    assert len(turns) >= 4, f"{name}: encoded in {len(turns) + 1} go(es)"


@pytest.mark.anyio
async def test_a_ping_is_answered_while_a_float_heavy_answer_is_encoded() -> None:
    order: list[str] = []

    async def big() -> None:
        await encode_answer_async(LOADS["floats"])
        order.append("big")

    async def ping() -> None:
        order.append("ping")

    async with anyio.create_task_group() as tg:
        tg.start_soon(big)
        tg.start_soon(ping)
    assert order == ["ping", "big"]


@pytest.mark.anyio
async def test_what_json_cannot_carry_is_still_an_internal_error_when_big() -> None:
    line = json.loads(await encode_answer_async(_answer([*FLOATS[:5000], float("nan")])))
    assert line["error"]["data"]["code"] == "INTERNAL_ERROR" and line["id"] == "r-1"
    half = _answer([*FLOATS[:5000], "\ud83d"])  # a lone surrogate: the json module's ASCII-escaped answer, whole
    assert await encode_answer_async(half) == encode(half)


@pytest.mark.parametrize(
    "line",
    [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"v": FLOATS}}).encode(),
        b'{"t":0.7,"z":-0.0,"e":1E5,"small":1e-400,"i":922337203685477580,"n":-12}',
        b'{"long":0.1000000000000000055511151231257827,"s":"0.0012345678901234567"}',
    ],
)
def test_a_float_heavy_request_line_is_read_as_the_json_module_reads_it(line: bytes) -> None:
    fast = _read_line(line)
    assert fast is not _UNREAD
    expected = parse_json(line.decode())
    assert fast == expected and repr(fast) == repr(expected)  # same values, same types


@pytest.mark.parametrize(
    "line",
    [
        b'{"big":18446744073709551616,"f":0.5}',
        b'{"i":-9223372036854775809,"f":0.5}',
        b'{"f":[1.5,1e19]}',
    ],
)
def test_a_line_with_a_long_integer_and_floats_is_left_to_the_json_module(line: bytes) -> None:
    assert _read_line(line) is _UNREAD  # orjson reads the integer as a float (1e19 may be one: read the slow way)


def test_float_lines_without_long_digit_runs_skip_the_json_module(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(text: str) -> Any:
        raise AssertionError("the json module read the line")

    monkeypatch.setattr(dispatcher, "parse_json", refuse)
    line = json.dumps({"params": {"v": FLOATS[:1000]}}).encode()
    assert _read_line(line) == json.loads(line)
    assert _read_line(b'{"x":1e400}') is _UNREAD and _read_line(b'{"x":NaN}') is _UNREAD
