"""Answers are encoded with orjson where it writes the json module's bytes (issue 22), else with the json module."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from enum import IntEnum, StrEnum
from typing import Any

import pytest

from sidecar.ipc import dispatcher
from sidecar.ipc.dispatcher import encode_answer
from sidecar.ipc.early import encode


class Kind(StrEnum):
    A = 'a"é'


class Level(IntEnum):
    HIGH = 3


@dataclasses.dataclass
class Point:
    x: int


def _answer(result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "result": result, "id": "r-1"}


SAME = [
    {"text": '结果 \n\t"\\ \u2028 😀 \x00\x1f\x7f' * 3, "n": [0, -1, 2**63 - 1, -(2**63), 2**64 - 1, True, None]},
    {"kind": Kind.A, "nested": [[{"a": []}], {}]},
    [_answer(1), _answer("x")],
]


@pytest.mark.parametrize("result", SAME)
def test_orjson_writes_what_the_json_module_writes(result: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    used: list[Any] = []
    real = dispatcher.orjson.dumps
    monkeypatch.setattr(dispatcher.orjson, "dumps", lambda obj: used.append(obj) or real(obj))
    assert encode_answer(_answer(result)) == encode(_answer(result))
    assert used  # it went through orjson


@pytest.mark.parametrize(
    "result",
    [
        {"f": 1e16},  # orjson: 1e16, repr(): 1e+16
        {"f": [0.5, 1e-7]},
        {"big": 2**64},
        {"small": -(2**63) - 1},
        {1: "int key"},
        {"t": (1, 2)},
        {"level": Level.HIGH},
        {"half": "\ud83d"},  # orjson refuses a lone surrogate: the json module writes it \u-escaped
    ],
)
def test_whatever_orjson_writes_differently_takes_the_json_module(result: Any) -> None:
    assert encode_answer(_answer(result)) == encode(_answer(result))
    assert json.loads(encode_answer(_answer(result)))["result"] == json.loads(encode(_answer(result)))["result"]


@pytest.mark.parametrize("result", [{"at": dt.datetime(2026, 1, 1)}, {"p": Point(1)}, {"nan": float("nan")}])
def test_what_json_cannot_carry_is_still_an_internal_error(result: Any) -> None:
    line = json.loads(encode_answer(_answer(result)))
    assert line["error"]["data"]["code"] == "INTERNAL_ERROR"
    assert line["id"] == "r-1"


def test_a_cycle_or_a_huge_answer_is_left_to_the_json_module() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    assert json.loads(encode_answer(_answer(cycle)))["error"]["data"]["code"] == "INTERNAL_ERROR"
    huge = list(range(dispatcher._ORJSON_NODES + 1))
    assert not dispatcher._orjson_writes_it_alike(huge)
    assert encode_answer(_answer(huge)) == encode(_answer(huge))


ODD = '结果 \n\t"\\ \u2028 😀𝄞 \x00\x1f\x7f\u0085 é'  # non-ASCII, astral, controls, quotes, backslashes
BIG = [
    {"text": ODD * (dispatcher.SLICE_CHARS // 7)},  # slices end mid-pattern, on astral and escaped characters
    {"a": [ODD * 40_000, {"b": ODD[3:] * 50_000, "n": [1, None, True]}], "z": ""},
    [_answer(ODD * 30_000), _answer("x")],
    {"exact": "q" * dispatcher.SLICE_CHARS * 3, "plus": "\\" * (dispatcher.SLICE_CHARS + 1)},
    {"half": ODD * 30_000 + "\ud83d"},  # orjson refuses a lone surrogate: the json module's bytes, as before
]


@pytest.mark.anyio
@pytest.mark.parametrize("result", BIG, ids=["one", "nested", "batch", "edges", "surrogate"])
async def test_a_big_answer_encoded_in_slices_is_byte_for_byte_the_whole(result: Any) -> None:
    whole = encode_answer(_answer(result))
    assert await dispatcher.encode_answer_async(_answer(result)) == whole == encode(_answer(result))


@pytest.mark.anyio
async def test_a_big_answer_lets_the_loop_in_between_its_slices() -> None:
    """A ping read while a big answer is encoded is answered before it (issue 22): the encoder yields."""
    import anyio

    order: list[str] = []

    async def big() -> None:
        await dispatcher.encode_answer_async(_answer({"text": ODD * dispatcher.SLICE_CHARS}))
        order.append("big answer encoded")

    async def ping() -> None:
        order.append("ping answered")

    async with anyio.create_task_group() as tg:
        tg.start_soon(big)
        tg.start_soon(ping)
    assert order == ["ping answered", "big answer encoded"]
