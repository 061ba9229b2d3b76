"""The stream assembler and the SSE/NDJSON framing, independent of any vendor."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.ir import MetonaErrorCode, MetonaStreamEvent, MetonaTokenUsage
from sidecar.providers import _http, stream
from sidecar.providers.errors import ProviderError, retry_after_ms
from sidecar.providers.stream import LineEmit, StreamAssembler

pytestmark = pytest.mark.anyio


def assembler(events: list[MetonaStreamEvent], *, think_tags: bool = False) -> StreamAssembler:
    return StreamAssembler(
        provider="p", model="m", request_id="r", session_id="s", iteration=2, emit=events.append, think_tags=think_tags
    )


async def test_tool_calls_buffered_by_index_and_completed_at_the_end() -> None:
    events: list[MetonaStreamEvent] = []
    asm = assembler(events)
    await asm.tool_delta(0, id="call_a", name="get_weather")
    await asm.tool_delta(1, id="call_b", name="get_time")
    await asm.tool_delta(0, args='{"city": "北')
    await asm.tool_delta(1, args="")
    await asm.tool_delta(0, args='京"}')
    asm.usage(MetonaTokenUsage(input_tokens=3, output_tokens=4, total_tokens=7))
    response = await asm.done()
    types = [e.type.value for e in events]
    assert types == [
        "tool_call_delta",
        "tool_call_delta",
        "tool_call_delta",
        "tool_call_delta",
        "tool_call_complete",
        "tool_call_complete",
        "usage",
        "done",
    ]
    assert [e.seq for e in events] == list(range(8))
    assert [(c.id, c.name, c.args) for c in response.tool_calls or []] == [
        ("call_a", "get_weather", {"city": "北京"}),
        ("call_b", "get_time", {}),
    ]
    assert response.finish_reason.value == "tool_calls"
    assert all(c.iteration == 2 for c in response.tool_calls or [])


@pytest.mark.parametrize("raw", ['{"a": ', "[1, 2]", '"text"', "nul"])
async def test_arguments_that_are_not_a_json_object_are_a_parse_error(raw: str) -> None:
    asm = assembler([])
    await asm.tool_delta(0, id="c", name="t", args=raw)
    with pytest.raises(ProviderError) as exc:
        await asm.done()
    assert exc.value.error.code is MetonaErrorCode.PARSE_ERROR
    assert exc.value.error.retryable is False


async def test_a_pending_tool_call_that_fails_at_done_still_closes_the_stream() -> None:
    events: list[MetonaStreamEvent] = []
    asm = assembler(events)
    await asm.tool_delta(0, id="c", name="t", args="[1]")  # never completed by the vendor: checked at done()
    with pytest.raises(ProviderError):
        await asm.done()
    assert [e.type.value for e in events] == ["tool_call_delta", "error", "done"]
    assert [e.seq for e in events] == [0, 1, 2]
    assert asm.closed


@pytest.mark.parametrize(
    "feed",
    [
        lambda asm: asm.text(7),
        lambda asm: asm.reasoning(["x"]),
        lambda asm: asm.tool_delta(0, id=1, name="t"),
        lambda asm: asm.tool_delta(0, name="t", args={"a": 1}),
        lambda asm: asm.tool_call(name=3, args={}),
    ],
)
async def test_a_vendor_value_that_is_not_a_string_is_rejected_before_it_is_emitted(feed: Any) -> None:
    events: list[MetonaStreamEvent] = []
    asm = assembler(events)
    with pytest.raises(TypeError):  # the adapter's parse turns it into invalid_response
        await feed(asm)
    assert events == []
    with pytest.raises(TypeError):
        asm.signature(5)  # type: ignore[arg-type]


async def test_failure_is_error_then_one_done_and_thinking_closed() -> None:
    events: list[MetonaStreamEvent] = []
    asm = assembler(events)
    await asm.reasoning("a")
    err = (await asm.fail(_error())).error
    assert err is not None
    await asm.fail(_error())  # a second close emits nothing
    assert [e.type.value for e in events] == ["thinking_start", "reasoning_delta", "thinking_end", "error", "done"]


def _error():
    from sidecar.ir import MetonaError

    return MetonaError(code=MetonaErrorCode.NETWORK_ERROR, message="x", retryable=True)


async def feed_text(parts: list[str]) -> tuple[str, str, list[str]]:
    events: list[MetonaStreamEvent] = []
    asm = assembler(events, think_tags=True)
    for part in parts:
        await asm.text(part)
    response = await asm.done()
    return response.content, response.reasoning_content or "", [e.type.value for e in events]


async def test_think_tags_split_across_chunks() -> None:
    content, reasoning, types = await feed_text(["\n<th", "ink>let me ", "see</thi", "nk>\n\nThe answer", " is 4."])
    assert reasoning == "let me see"
    assert content == "The answer is 4."
    assert (await feed_text(["<think>x</think>", "\n", "\nAnswer"]))[:2] == ("Answer", "x")
    assert types[0] == "thinking_start" and "thinking_end" in types


async def test_text_that_only_looks_like_a_tag_is_text() -> None:
    assert (await feed_text(["<thin", "g>"]))[:2] == ("<thing>", "")
    assert (await feed_text(["Hello <think>not at start</think>"]))[:2] == ("Hello <think>not at start</think>", "")
    assert (await feed_text(["<thi"]))[:2] == ("<thi", "")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=7), min_size=1, max_size=20))
def test_think_tag_parsing_does_not_depend_on_chunking(cuts: list[int]) -> None:
    import anyio

    text = "<think>步骤一，步骤二</think>答案是 42。"
    parts, i = [], 0
    for n in cuts:
        if i >= len(text):
            break
        parts.append(text[i : i + n])
        i += n
    parts.append(text[i:])
    content, reasoning, _ = anyio.run(feed_text, [p for p in parts if p])
    assert (content, reasoning) == ("答案是 42。", "步骤一，步骤二")


async def chunks_of(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def test_sse_framing() -> None:
    body = [b'data: {"a"', b":1}\r\n\r\n: keep-alive\n\nevent: error\ndata: x\ndata: y\n\n", b"data: [DONE]"]
    events = [(e.event, e.data) async for e in _http.iter_sse(chunks_of(*body))]
    assert events == [("message", '{"a":1}'), ("error", "x\ny"), ("message", "[DONE]")]


async def test_ndjson_lines() -> None:
    lines = [line async for line in _http.iter_ndjson_lines(chunks_of(b'{"a":1}\n\n{"b"', b":2}\r\n", b'{"c":3}'))]
    assert lines == [b'{"a":1}', b'{"b":2}', b'{"c":3}']


def test_retry_after_forms() -> None:
    assert retry_after_ms({"retry-after": "2"}) == 2000
    assert retry_after_ms({"retry-after-ms": "150", "retry-after": "9"}) == 150
    assert retry_after_ms({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=1445412470.0) == 10_000
    assert retry_after_ms({"retry-after": "soon"}) is None
    assert retry_after_ms({}) is None


async def test_a_failure_closed_from_a_cancelled_request_still_ends_with_done() -> None:
    """The emitter yields to the loop at every line (the wire writer does, every 16th line); a failure closed in a
    cancelled scope must still write error then done."""
    import anyio

    events: list[MetonaStreamEvent] = []

    async def emit(event: MetonaStreamEvent) -> None:
        events.append(event)
        await anyio.lowlevel.checkpoint()

    asm = StreamAssembler(provider="p", model="m", request_id="r", session_id="s", iteration=1, emit=emit)
    await asm.text("partial")
    with anyio.CancelScope() as scope:
        scope.cancel()
        await asm.fail(_error())
    assert [e.type.value for e in events] == ["text_delta", "error", "done"]


@pytest.mark.parametrize("request_id", ["r", "r\ud800"])
async def test_a_line_emitter_gets_the_lines_the_events_render(
    request_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LineEmit (issue 22): text deltas go out as lines built without the event; every line, in order, is the one
    the event path renders, byte for byte (lone surrogates in a delta or an id included)."""
    monkeypatch.setattr(stream.time, "time_ns", lambda: 1_719_000_000_123_456_789)
    lines: list[bytes] = []

    async def send_line(line: bytes) -> None:
        lines.append(line)

    events: list[MetonaStreamEvent] = []
    for emit in (LineEmit(send_line), events.append):
        asm = StreamAssembler(provider="p", model="m", request_id=request_id, session_id="s", iteration=2, emit=emit)
        for piece in ("流式", 'a "q"\n', "😀\ud83d", "", "x"):
            await asm.text(piece)
        await asm.reasoning("r")
        await asm.text("after")
        await asm.done()
    assert lines == [e.to_line() for e in events]
    assert [e.seq for e in events] == list(range(9))
    assert json.loads(lines[2].decode("utf-8"))["delta"] == "😀\ud83d"  # valid UTF-8, escaped
