"""The shared lenient tool-call parser (parse priority: native → json_object → fallback) and its streaming form."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.ir import MetonaStreamEvent, MetonaToolDef
from sidecar.providers.stream import StreamAssembler
from sidecar.providers.toolparse import parse_tool_text, tool_prompt

pytestmark = pytest.mark.anyio


def _tool(name: str, props: dict[str, str], required: list[str]) -> MetonaToolDef:
    return MetonaToolDef.model_validate(
        {
            "name": name,
            "description": f"the {name} tool",
            "parameters": {
                "type": "object",
                "properties": {k: {"type": v, "description": k} for k, v in props.items()},
                "required": required,
            },
            "category": "calculation",
            "riskLevel": "safe",
            "requiresPermission": False,
            "timeoutMs": 1000,
        }
    )


TOOLS = [
    _tool("calculator", {"expression": "string"}, ["expression"]),
    _tool("get_weather", {"city": "string", "days": "number"}, ["city"]),
]
CALC = {"name": "calculator", "arguments": {"expression": "37*43"}}


def _calls(text: str) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, c.args) for c in parse_tool_text(text, TOOLS).calls]


def test_tagged_qwen_call() -> None:
    text = 'Let me compute.\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "37*43"}}\n</tool_call>'
    result = parse_tool_text(text, TOOLS)
    assert [(c.name, c.args) for c in result.calls] == [("calculator", {"expression": "37*43"})]
    assert result.text == "Let me compute."


def test_two_tagged_calls_and_an_unclosed_last_tag() -> None:
    text = (
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>\n'
        '<tool_call>{"name": "calculator", "arguments": {"expression": "1+1"}}'
    )
    assert _calls(text) == [("get_weather", {"city": "Paris"}), ("calculator", {"expression": "1+1"})]


def test_bare_json_object() -> None:
    assert _calls('{"name": "calculator", "arguments": {"expression": "37*43"}}') == [
        ("calculator", {"expression": "37*43"})
    ]


def test_bare_json_variants_parameters_key_string_arguments_openai_shape() -> None:
    assert _calls('{"name": "calculator", "parameters": {"expression": "2*3"}}') == [
        ("calculator", {"expression": "2*3"})
    ]
    assert _calls('{"name": "calculator", "arguments": "{\\"expression\\": \\"2*3\\"}"}') == [
        ("calculator", {"expression": "2*3"})
    ]
    assert _calls('{"type": "function", "function": {"name": "calculator", "arguments": {"expression": "9"}}}') == [
        ("calculator", {"expression": "9"})
    ]


def test_fenced_json_block_with_prose_around() -> None:
    text = 'I will use the calculator:\n```json\n{"name": "calculator", "arguments": {"expression": "37*43"}}\n```\n'
    result = parse_tool_text(text, TOOLS)
    assert [(c.name, c.args) for c in result.calls] == [("calculator", {"expression": "37*43"})]
    assert result.text == "I will use the calculator:"


def test_malformed_json_stays_text() -> None:
    for text in (
        '{"name": "calculator", "arguments": {"expression": "37*43"}',
        '```json\n{"name": "calculator", arguments: 37*43}\n```',
        "<tool_call>{not json}</tool_call>",
    ):
        result = parse_tool_text(text, TOOLS)
        assert result.calls == []
        assert result.text == text
        assert result.rejected


def test_wrong_tool_or_invalid_arguments_stay_text() -> None:
    for text, why in (
        ('{"name": "get_time", "arguments": {}}', "not an offered tool"),
        ('{"name": "calculator", "arguments": {"expr": "1"}}', "invalid arguments"),
        ('{"name": "calculator", "arguments": {"expression": 5}}', "invalid arguments"),
        ('{"name": "get_weather", "arguments": {"city": "Rome", "days": "two"}}', "invalid arguments"),
        ('{"name": "calculator", "arguments": [1]}', "not a JSON object"),
    ):
        result = parse_tool_text(text, TOOLS)
        assert result.calls == [], text
        assert result.text == text
        assert any(why in r for r in result.rejected), result.rejected


def test_a_call_repeated_in_one_answer_is_one_call() -> None:
    one = '{"name": "calculator", "arguments": {"expression": "37*43"}}'
    other = '{"name": "calculator", "arguments": {"expression": "1591"}}'
    assert _calls(f"{one}\n{one}\n{other}\n{one}") == [
        ("calculator", {"expression": "37*43"}),
        ("calculator", {"expression": "1591"}),
    ]


def test_one_bad_call_in_a_list_rejects_the_block() -> None:
    text = '[{"name": "calculator", "arguments": {"expression": "1"}}, {"name": "nope", "arguments": {}}]'
    assert _calls(text) == []


def test_plain_prose_and_json_data_that_is_not_a_call() -> None:
    assert _calls("The answer is 1591.") == []
    assert _calls('{"answer": 1591}') == []
    assert _calls("北京是中国的首都。") == []


def test_no_tools_offered_means_text() -> None:
    assert parse_tool_text(_json(CALC), []).calls == []


def test_tool_prompt_lists_every_tool() -> None:
    prompt = tool_prompt(TOOLS)
    assert '"name": "calculator"' in prompt and '"name": "get_weather"' in prompt and '"arguments"' in prompt


@settings(max_examples=60, deadline=None)
@given(st.text())
def test_never_raises_and_never_invents_a_call(text: str) -> None:
    result = parse_tool_text(text, TOOLS)
    for call in result.calls:
        assert call.name in {"calculator", "get_weather"}
    if not result.calls:
        assert result.text == text


# ---- streaming through the assembler -------------------------------------------------------------------------


def _asm(events: list[MetonaStreamEvent]) -> StreamAssembler:
    asm = StreamAssembler(provider="p", model="m", request_id="r", session_id="s", iteration=1, emit=events.append)
    asm.tool_fallback(TOOLS)
    return asm


def _json(value: Any) -> str:
    import json

    return json.dumps(value)


@pytest.mark.parametrize("chunk", [1, 3, 7, 1000])
async def test_stream_a_bare_call_in_chunks_becomes_one_tool_call(chunk: int) -> None:
    events: list[MetonaStreamEvent] = []
    asm = _asm(events)
    text = "  \n" + _json(CALC)
    for i in range(0, len(text), chunk):
        await asm.text(text[i : i + chunk])
    response = await asm.done()
    types = [e.type.value for e in events]
    assert types == ["tool_call_complete", "done"]
    assert response.tool_calls and response.tool_calls[0].name == "calculator"
    assert response.tool_calls[0].args == {"expression": "37*43"}
    assert response.finish_reason.value == "tool_calls"


async def test_stream_prose_flows_at_once_and_a_fenced_call_after_it_is_parsed() -> None:
    events: list[MetonaStreamEvent] = []
    asm = _asm(events)
    await asm.text("I will ")
    await asm.text("compute it.\n`")
    assert [e.delta for e in events] == ["I will ", "compute it.\n"]  # the backtick may open a fence: held
    await asm.text('``json\n{"name": "calculator", "arguments": {"expression": "37*43"}}\n```')
    response = await asm.done()
    assert response.tool_calls and response.tool_calls[0].args == {"expression": "37*43"}
    assert response.content == "I will compute it.\n"


async def test_stream_a_wrong_tool_is_released_as_text() -> None:
    events: list[MetonaStreamEvent] = []
    asm = _asm(events)
    text = '{"name": "get_time", "arguments": {}}'
    await asm.text(text)
    assert events == []
    response = await asm.done()
    assert response.tool_calls is None
    assert response.content == text
    assert [e.type.value for e in events] == ["text_delta", "done"]


async def test_stream_plain_answer_is_not_held() -> None:
    events: list[MetonaStreamEvent] = []
    asm = _asm(events)
    await asm.text("1591")
    await asm.text(" is the answer {really}.")
    assert "".join(e.delta or "" for e in events) == "1591 is the answer {really}."
    response = await asm.done()
    assert response.content == "1591 is the answer {really}." and response.finish_reason.value == "stop"
