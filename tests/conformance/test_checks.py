"""The checker itself can fail: a correct run passes, and each broken variant of it is caught."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from sidecar.ir import MetonaStreamEvent, MetonaStreamEventType, MetonaTokenUsage

from .checks import check_run
from .loopback import LoopbackServer, Recording
from .suite import CASES, TARGETS_BY_NAME, Run, plan, run_pair

pytestmark = pytest.mark.anyio
T = MetonaStreamEventType


def sse(*objs: object) -> tuple[bytes, ...]:
    return (*(f"data: {json.dumps(o)}\n\n".encode() for o in objs), b"data: [DONE]\n\n")


def chunk(
    delta: dict[str, object], finish: str | None = None, usage: dict[str, int] | None = None
) -> dict[str, object]:
    out: dict[str, object] = {"id": "c1", "object": "chat.completion.chunk", "model": "deepseek-reasoner"}
    out["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    if usage:
        out["usage"] = usage
    return out


REASONING = Recording(
    status=200,
    headers={"content-type": "text/event-stream"},
    chunks=sse(
        chunk({"role": "assistant", "reasoning_content": "Compare "}),
        chunk({"reasoning_content": "9.8 and 9.11."}),
        chunk({"content": "9.8 is "}),
        chunk({"content": "larger."}, "stop", {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}),
    ),
    name="synthetic/reasoning",
)


@pytest.fixture(scope="module")
def loopback() -> Iterator[LoopbackServer]:
    with LoopbackServer() as server:
        yield server


@pytest.fixture
async def good_run(loopback: LoopbackServer) -> Run:
    loopback.reset()
    case = next(c for c in CASES if c.id == "provider-reasoning")
    pair = plan(TARGETS_BY_NAME["deepseek"], case)
    return await run_pair(loopback, pair, REASONING)


def types(run: Run) -> list[str]:
    return [e.type.value for e in run.events]


async def test_a_correct_run_passes(good_run: Run) -> None:
    assert check_run(good_run) == []
    assert types(good_run) == [
        "thinking_start",
        "reasoning_delta",
        "reasoning_delta",
        "thinking_end",
        "text_delta",
        "text_delta",
        "usage",
        "done",
    ]


def renumber(events: list[MetonaStreamEvent]) -> list[MetonaStreamEvent]:
    return [e.model_copy(update={"seq": i}) for i, e in enumerate(events)]


@pytest.mark.parametrize(
    ("name", "mutate", "expected"),
    [
        ("seq gap", lambda ev: ev[:2] + ev[3:], "seq"),
        ("two dones", lambda ev: renumber([*ev, ev[-1]]), "exactly one done"),
        ("usage not before done", lambda ev: renumber([*ev[:4], ev[6], *ev[4:6], ev[7]]), "usage must come once"),
        ("reasoning outside the frame", lambda ev: renumber([ev[1], *ev[:1], *ev[2:]]), "outside thinking_start"),
        ("text lost", lambda ev: renumber([*ev[:5], *ev[6:]]), "content is not the text deltas"),
        ("foreign request id", lambda ev: [ev[0].model_copy(update={"request_id": "other"}), *ev[1:]], "carries"),
        (
            "error in a success",
            lambda ev: renumber([*ev[:-1], ev[-1].model_copy(update={"type": T.ERROR}), ev[-1]]),
            "error",
        ),
    ],
)
async def test_a_broken_stream_is_caught(good_run: Run, name: str, mutate, expected: str) -> None:
    good_run.events = mutate(list(good_run.events))
    problems = check_run(good_run)
    assert any(expected in p for p in problems), (name, problems)


async def test_a_wrong_response_is_caught(good_run: Run) -> None:
    good_run.response = good_run.response.model_copy(
        update={"usage": MetonaTokenUsage(input_tokens=1, output_tokens=1, total_tokens=2)}
    )
    problems = check_run(good_run)
    assert any("usage event differs" in p for p in problems), problems
    assert any("outputTokens 1, recorded 7" in p for p in problems), problems


async def test_a_request_off_the_mapping_is_caught(good_run: Run) -> None:
    good_run.received[0].json = {**good_run.received[0].json, "reasoning_effort": "medium", "model": "x"}
    problems = check_run(good_run)
    assert any("reasoning_effort is 'medium', want 'high'" in p for p in problems), problems
    assert any("model 'x'" in p for p in problems), problems


PLAIN = Recording(
    status=200,
    headers={"content-type": "text/event-stream"},
    chunks=sse(
        chunk({"role": "assistant", "content": "It is "}),
        chunk({"content": "sunny."}, "stop", {"prompt_tokens": 30, "completion_tokens": 3, "total_tokens": 33}),
    ),
    name="synthetic/plain",
)


async def test_a_lost_tool_result_is_caught(loopback: LoopbackServer) -> None:
    loopback.reset()
    case = next(c for c in CASES if c.id == "provider-tool-result-round")
    run = await run_pair(loopback, plan(TARGETS_BY_NAME["openai"], case), PLAIN)
    assert check_run(run) == []
    body = run.received[0].json
    body["messages"] = [m for m in body["messages"] if m["role"] != "tool"]
    problems = check_run(run)
    assert any("no tool message for call_weather_paris_1" in p for p in problems), problems
    assert any("'marker-summary-4471' is not in the body" in p for p in problems), problems
