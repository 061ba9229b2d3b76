"""MetonaStreamEvent lines: the seed's 流式传输协议 example, byte for byte, and the line rules."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from sidecar.ir import (
    MetonaError,
    MetonaErrorCode,
    MetonaStreamEvent,
    MetonaStreamEventType,
    MetonaTokenUsage,
    MetonaToolCall,
    ToolCallDelta,
)

# The 8 lines of the seed's "流式传输协议" block. The seed's tool_call_complete line carries a `{...}`
# placeholder; it is replaced here by the seed's example-2 call (id tc_1, read_file, /home/user/data.csv)
# with iteration 1 and that line's timestamp.
SEED_LINES = [
    '{"type":"thinking_start","requestId":"r_1","sessionId":"s_1","iteration":1,"seq":0,"timestamp":1719000000000}',
    '{"type":"reasoning_delta","requestId":"r_1","sessionId":"s_1","iteration":1,"seq":1,"timestamp":1719000000100,'
    '"delta":"让我先分析问题的关键点..."}',
    '{"type":"thinking_end","requestId":"r_1","sessionId":"s_1","iteration":1,"seq":2,"timestamp":1719000000500}',
    '{"type":"text_delta","requestId":"r_1","sessionId":"s_1","iteration":1,"seq":3,"timestamp":1719000000600,'
    '"delta":"根据分析，"}',
    '{"type":"text_delta","requestId":"r_1","sessionId":"s_1","iteration":1,"seq":4,"timestamp":1719000000650,'
    '"delta":"答案是..."}',
    '{"type":"tool_call_complete","requestId":"r_1","sessionId":"s_1","iteration":1,"seq":5,"timestamp":1719000000700,'
    '"toolCall":{"id":"tc_1","name":"read_file","args":{"file_path":"/home/user/data.csv"},"iteration":1,'
    '"timestamp":1719000000700}}',
    '{"type":"usage","requestId":"r_1","sessionId":"s_1","iteration":1,"seq":6,"timestamp":1719000000800,'
    '"usage":{"inputTokens":120,"outputTokens":45,"totalTokens":165}}',
    '{"type":"done","requestId":"r_1","sessionId":"s_1","iteration":1,"seq":7,"timestamp":1719000000800}',
]

IDS = ("r_1", "s_1", 1)


@pytest.mark.parametrize("line", SEED_LINES)
def test_seed_line_round_trips_byte_for_byte(line: str) -> None:
    raw = line.encode("utf-8")
    event = MetonaStreamEvent.from_line(raw)
    assert event.to_line() == raw
    assert MetonaStreamEvent.from_line(line).to_line() == raw  # str input too
    assert MetonaStreamEvent.from_line(raw + b"\n").to_line() == raw  # a trailing newline is allowed


@pytest.mark.parametrize("line", SEED_LINES)
def test_to_line_agrees_with_the_generic_dump(line: str) -> None:
    event = MetonaStreamEvent.from_line(line)
    dumped = event.model_dump(mode="json")
    assert list(dumped) == list(json.loads(line))  # same keys, same order
    assert json.dumps(dumped, ensure_ascii=False, separators=(",", ":")).encode() == event.to_line()
    assert event.model_dump_json().encode() == event.to_line()


def test_helper_constructors_build_the_seed_stream() -> None:
    call = MetonaToolCall(
        id="tc_1", name="read_file", args={"file_path": "/home/user/data.csv"}, iteration=1, timestamp=1719000000700
    )
    events = [
        MetonaStreamEvent.thinking_start(*IDS, 0, 1719000000000),
        MetonaStreamEvent.reasoning_delta(*IDS, 1, 1719000000100, "让我先分析问题的关键点..."),
        MetonaStreamEvent.thinking_end(*IDS, 2, 1719000000500),
        MetonaStreamEvent.text_delta(*IDS, 3, 1719000000600, "根据分析，"),
        MetonaStreamEvent.text_delta(*IDS, 4, 1719000000650, "答案是..."),
        MetonaStreamEvent.tool_call_complete(*IDS, 5, 1719000000700, call),
        MetonaStreamEvent.usage_event(
            *IDS, 6, 1719000000800, MetonaTokenUsage(input_tokens=120, output_tokens=45, total_tokens=165)
        ),
        MetonaStreamEvent.done(*IDS, 7, 1719000000800),
    ]
    assert [e.to_line().decode() for e in events] == SEED_LINES


def test_tool_call_delta_and_error_payloads() -> None:
    first = MetonaStreamEvent.tool_call_delta_event(*IDS, 0, 5, ToolCallDelta(index=0, name="read_file"))
    assert first.to_line() == (
        b'{"type":"tool_call_delta","requestId":"r_1","sessionId":"s_1","iteration":1,"seq":0,"timestamp":5,'
        b'"toolCallDelta":{"index":0,"name":"read_file"}}'
    )
    more = MetonaStreamEvent.tool_call_delta_event(*IDS, 1, 6, ToolCallDelta(index=0, args_delta='{"file_path":'))
    assert more.to_line() == (
        b'{"type":"tool_call_delta","requestId":"r_1","sessionId":"s_1","iteration":1,"seq":1,"timestamp":6,'
        b'"toolCallDelta":{"index":0,"argsDelta":"{\\"file_path\\":"}}'
    )
    err = MetonaStreamEvent.error_event(
        *IDS,
        2,
        7,
        MetonaError(code=MetonaErrorCode.RATE_LIMITED, message="slow down", provider="deepseek", retryable=True),
    )
    assert err.to_line() == (
        b'{"type":"error","requestId":"r_1","sessionId":"s_1","iteration":1,"seq":2,"timestamp":7,'
        b'"error":{"code":"rate_limited","message":"slow down","provider":"deepseek","retryable":true}}'
    )
    for event in (first, more, err):
        assert MetonaStreamEvent.from_line(event.to_line()) == event


def test_line_escaping_is_json_and_single_line() -> None:
    event = MetonaStreamEvent.text_delta(*IDS, 0, 1, 'a "quote"\\ and\nnew line\t\u2028 😀')
    line = event.to_line()
    assert b"\n" not in line
    assert line == (
        b'{"type":"text_delta","requestId":"r_1","sessionId":"s_1","iteration":1,"seq":0,"timestamp":1,'
        + '"delta":"a \\"quote\\"\\\\ and\\nnew line\\t\u2028 😀"}'.encode()
    )
    assert MetonaStreamEvent.from_line(line).delta == event.delta


@pytest.mark.parametrize("start", range(0, 0x10000, 0x1000))
def test_every_character_is_escaped_as_the_json_module_does(start: int) -> None:
    """Strings go out through orjson (issue 22): its escaping must be the json module's, byte for byte."""
    text = "".join(chr(c) for c in range(start, start + 0x1000) if not 0xD800 <= c < 0xE000) + "😀\U0010ffff"
    for make in (MetonaStreamEvent.text_delta, MetonaStreamEvent.reasoning_delta):
        event = make(text, text, 7, 3, 1719000000000, text)
        expected = json.dumps(event.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))
        assert event.to_line() == expected.encode("utf-8")


def test_lone_surrogate_falls_back_to_ascii_escapes() -> None:
    event = MetonaStreamEvent.text_delta(*IDS, 0, 1, "半个\ud83d")
    line = event.to_line()
    line.decode("utf-8")  # valid UTF-8
    assert line.endswith(b'"delta":"\\u534a\\u4e2a\\ud83d"}')
    assert json.loads(line)["delta"] == "半个\ud83d"


def test_stream_event_type_is_validated() -> None:
    with pytest.raises(ValidationError):
        MetonaStreamEvent.from_line(
            b'{"type":"text","requestId":"r","sessionId":"s","iteration":1,"seq":0,"timestamp":1}'
        )
    with pytest.raises(ValidationError):
        MetonaStreamEvent.from_line(b'{"type":"done","requestId":"r","sessionId":"s","iteration":1,"timestamp":1}')
    assert MetonaStreamEvent.from_line(SEED_LINES[0]).type is MetonaStreamEventType.THINKING_START
