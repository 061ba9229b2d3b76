"""The local provider's constrained tool use without the model: the decision's expression, the arguments' schema,
the repeat guard, the compact prompt, and the adapter's steps over a scripted runtime (one script per generation)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from typing import Any
from unittest.mock import ANY

import jsonschema
import numpy as np
import pytest

from sidecar.ir import MetonaMessage, MetonaRequest, MetonaToolDef
from sidecar.providers import local as local_module
from sidecar.providers import localtools as lt
from sidecar.providers.base import ProviderConfig
from sidecar.providers.local import LocalAdapter

from .support import request as _request
from .support import tool

ASKED = [{"role": "user", "content": "What is 2 ** 16?", "timestamp": 1}]
"""The request the scripted steps answer unless a test gives its own: it states the numbers the scripted
calculator calls use (a formula of numbers nobody gave is made up: :func:`localtools.made_up`)."""


def request(messages: list[dict[str, Any]] | None = None, **kwargs: Any) -> MetonaRequest:
    return _request(messages or ASKED, **kwargs)


pytestmark = pytest.mark.anyio

WRITE = {
    **tool("write_file", "path"),
    "description": "Write a UTF-8 text file in the workspace. mode: create or append.",
    "parameters": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Relative path."},
            "content": {"type": "string", "description": "The text."},
            "mode": {"type": "string", "description": "How.", "enum": ["create", "append"], "default": "create"},
            "tags": {"type": "array", "description": "Tags.", "items": {"type": "string", "description": "a tag"}},
            "limit": {"type": "number", "description": "Most lines."},
            "size": {"type": "number", "description": "Bytes."},
        },
        "required": ["path", "content", "size"],
    },
}
CALC = {**tool("calculator", "expression"), "description": "Evaluate an arithmetic expression: + - * /."}
TIME = {
    **tool("get_current_time"),
    "description": "The current date and time.",
    "parameters": {"type": "object", "properties": {}},
}


class FavouringEmbedder:
    """Ranks the tool whose summary starts with ``favoured`` first (the others tie): the request's vector is
    (1, 0), that tool's (1, 0), every other text's (0, 1)."""

    def __init__(self, favoured: str = "") -> None:
        self.favoured = favoured
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        hit = [i == 0 or (bool(self.favoured) and t.startswith(self.favoured)) for i, t in enumerate(texts)]
        return np.array([[1.0, 0.0] if h else [0.0, 1.0] for h in hit], dtype=np.float32)


class Halfway(FavouringEmbedder):
    """The calculator's summary at cosine 1 with the request, every other text's at 0.5."""

    def embed(self, texts: list[str]) -> np.ndarray:
        half = [0.5, math.sqrt(0.75)]
        return np.array([[1.0, 0.0] if i == 0 or t.startswith("calculator") else half for i, t in enumerate(texts)])


def defs(*tools: dict[str, Any]) -> list[MetonaToolDef]:
    return [MetonaToolDef.model_validate(t) for t in tools]


# ---- pure logic --------------------------------------------------------------------------------------------


def test_the_decision_admits_answer_and_the_offered_tools_only() -> None:
    pattern = lt.choice_regex(["calculator", "write_file", "a-b.c"])
    assert lt.DECISION_PREFIX == '{"tool": "'
    for name in ("answer", "calculator", "write_file", "a-b.c"):
        assert re.fullmatch(pattern, f'{name}"')
    for text in ('read_file"', 'calc"', "answer", 'a-bxc"', '{"tool": "answer"'):
        assert re.fullmatch(pattern, text) is None
    assert lt.decision_of('{"tool": "calculator"', ["calculator"]) == "calculator"
    assert lt.decision_of('{"tool": "answer"', ["calculator"]) == "answer"
    assert lt.decision_of('{"tool": "read_file"', ["calculator"]) is None
    assert lt.decision_of("calculator", ["calculator"]) is None


def test_offered_tools_are_unique_and_never_named_answer() -> None:
    tools = defs(CALC, {**CALC, "description": "again"}, {**CALC, "name": "answer"}, {**CALC, "name": 'q"uote'})
    assert [t.name for t in lt.offered(tools)] == ["calculator"]


def test_the_arguments_schema_keeps_the_shape_and_closes_objects() -> None:
    (write,) = defs(WRITE)
    schema = lt.arguments_schema(write.parameters.model_dump(mode="json", exclude_none=True))
    assert "description" not in json.dumps(schema) and "default" not in json.dumps(schema)
    assert schema["additionalProperties"] is False and schema["required"] == ["path", "content", "size"]
    assert "limit" not in schema["properties"], "an optional number is left to its default"
    assert schema["properties"]["size"] == {"type": "number"}
    assert schema["properties"]["mode"] == {"type": "string", "enum": ["create", "append"]}
    assert schema["properties"]["tags"] == {"type": "array", "items": {"type": "string"}}
    jsonschema.validate({"path": "a.md", "content": "x", "mode": "append", "size": 3}, schema)
    for bad in ({"path": "a.md", "size": 3}, {"path": "a.md", "content": "x", "size": 3, "limit": 1}, {"path": 1}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    empty = lt.arguments_schema({"type": "object"})
    assert empty == {"type": "object", "properties": {}, "additionalProperties": False}


def test_an_optional_number_is_offered_only_the_stated_numbers_its_declaration_allows() -> None:
    count = {"type": "number", "description": "How many links (integer, 1-10, default 3)"}
    ratio = {"type": "number", "description": "A share (>= 0)"}
    params = {"type": "object", "properties": {"count": count, "ratio": ratio, "note": {"type": "string"}}}
    schema = lt.arguments_schema(params, numbers=lt.stated_numbers("2.5 inch drives under $1,299.99, 20 links, -1"))
    assert "count" not in schema["properties"], "no stated number is an integer from 1 to 10"
    assert schema["properties"]["ratio"] == {"type": "number", "enum": [2.5, 1299.99, 20]}
    schema = lt.arguments_schema(params, numbers=lt.stated_numbers("give me 5 links"))
    assert schema["properties"]["count"] == {"type": "number", "enum": [5]}


def test_an_optional_number_is_one_the_request_states_or_left_out() -> None:
    (write,) = defs(WRITE)
    declared = write.parameters.model_dump(mode="json", exclude_none=True)
    schema = lt.arguments_schema(declared, numbers=lt.stated_numbers("Write 3 lines, at most 20 of them, to a.md"))
    assert schema["properties"]["limit"] == {"type": "number", "enum": [3, 20]}
    assert schema["properties"]["size"] == {"type": "number"}, "a required number stays free"
    jsonschema.validate({"path": "a.md", "content": "x", "size": 7, "limit": 20}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"path": "a.md", "content": "x", "size": 7, "limit": 7}, schema)
    assert (
        "limit"
        not in lt.arguments_schema(declared, numbers=lt.stated_numbers("How long is the X1's warranty?"))["properties"]
    )


def test_an_optional_argument_given_as_an_empty_string_is_left_to_its_default() -> None:
    params = {"type": "object", "required": ["repo", "name"], "properties": {}}
    written = {"repo": "/src", "name": "", "contains": "", "kind": "all", "depth": 0}
    assert lt.without_empty(written, params) == {"repo": "/src", "name": "", "kind": "all", "depth": 0}
    lists = {"repo": "/src", "name": [], "deck": [], "filters": {}, "tags": ["a"], "depth": 0, "on": False}
    assert lt.without_empty(lists, params) == {"repo": "/src", "name": [], "tags": ["a"], "depth": 0, "on": False}


def test_a_number_stated_once_fills_one_argument() -> None:
    properties = {k: {"type": "number", "description": k} for k in ("lat", "lon", "hours", "days")}
    params = {"type": "object", "required": ["lat", "lon"], "properties": properties}
    ask = "The forecast at 52.52, 13.41 for 3 days"
    written = {"lat": 52.52, "lon": 13.41, "hours": 13.41, "days": 3}
    assert lt.spare_numbers(written, params, ask) == {"lat": 52.52, "lon": 13.41, "days": 3}
    assert lt.spare_numbers({"lat": 2, "lon": 2, "hours": 2}, params, "2 and 2, then 2") == {
        "lat": 2,
        "lon": 2,
        "hours": 2,
    }
    assert lt.spare_numbers({"lat": 2, "lon": 2, "hours": 2}, params, "2 and 2") == {"lat": 2, "lon": 2}
    query = {**params, "required": ["lat", "lon", "q"]}
    windows = {"lat": 1, "lon": 2, "q": "Windows 11 news", "hours": 11}
    assert lt.spare_numbers(windows, query, "news about Windows 11, 1 2") == {
        "lat": 1,
        "lon": 2,
        "q": "Windows 11 news",
    }
    nested = {"lat": {"v": 52.52}, "lon": [13.41], "hours": 13.41}
    assert lt.spare_numbers(nested, params, "at 52.52, 13.41") == {"lat": {"v": 52.52}, "lon": [13.41]}
    enum = {**params, "properties": {**properties, "days": {"type": "number", "enum": ["3"]}}}
    assert lt.spare_numbers({"lat": 3, "lon": 1, "days": 3}, enum, "3 days") == {"lat": 3, "lon": 1, "days": 3}


def test_a_number_the_request_gives_as_another_arguments_is_not_an_optional_ones() -> None:
    numbers = {k: {"type": "number"} for k in ("inductance", "capacitance")} | {"round_off": {"type": "integer"}}
    params = {"type": "object", "required": ["inductance", "capacitance"], "properties": numbers}
    ask = "The resonant frequency of an LC circuit given capacitance of 100µF and inductance of 50mH."
    written = {"capacitance": 0.0001, "inductance": 0.05, "round_off": 100}  # 100 µF written in farads
    assert lt.spare_numbers(written, params, ask) == {"capacitance": 0.0001, "inductance": 0.05}
    rounded = {**written, "round_off": 3}
    assert lt.spare_numbers(rounded, params, ask + " Round it to 3 places.") == rounded
    again = ask + " Round it off to 100 places."  # stated once more, not as the capacitance's
    assert lt.spare_numbers(written, params, again) == written
    own = {**params, "properties": {**numbers, "round_off": {"type": "integer"}, "capacitance": {"type": "string"}}}
    assert lt.spare_numbers(written, own, "a round off of 100, capacitance of 100") == written
    charges = {k: {"type": "number"} for k in ("charge", "distance", "permitivity")}
    field = {"type": "object", "required": ["charge", "distance"], "properties": charges}
    two = "The first charge is 5 C at a distance of 2 meters; the second is 3 C at a distance of 4 meters."
    assert lt.spare_numbers({"charge": 5, "distance": 2, "permitivity": 4}, field, two) == {
        "charge": 5,
        "distance": 2,
    }
    pages = {"type": "object", "required": [], "properties": {k: {"type": "integer"} for k in ("page", "page_size")}}
    assert lt.spare_numbers({"page_size": 50}, pages, "a page of 50 results") == {"page_size": 50}  # page: not given
    sides = {"type": "object", "required": [], "properties": {k: {"type": "integer"} for k in ("width", "height")}}
    square = {"width": 512, "height": 512}  # one value for both
    assert lt.spare_numbers(square, sides, "an image with width and height of 512") == square
    volts = {"type": "object", "required": ["capacitance"], "properties": {"voltage": {"type": "number"}, **numbers}}
    at = {"capacitance": 0.0001, "voltage": 12}  # "at" gives no capacitance of 12
    assert lt.spare_numbers(at, volts, "a capacitance at 12 V") == at


def test_a_number_stated_once_leaves_the_argument_it_is_the_default_of() -> None:
    hinted = {"type": "number", "description": "Most characters. (integer, 1-999999, default 5000)"}
    start = {"type": "number", "description": "Where to start. (integer, >= 0, default 0)"}
    params = {"type": "object", "required": ["url"], "properties": {"url": {"type": "string"}}}
    params["properties"] |= {"max_length": hinted, "start_index": start}
    twice = {"url": "u", "max_length": 5000, "start_index": 5000}
    assert lt.spare_numbers(twice, params, "从第5000个字符开始接着读") == {"url": "u", "start_index": 5000}
    other = {"url": "u", "max_length": 3000, "start_index": 3000}  # neither is a default: the first keeps it
    assert lt.spare_numbers(other, params, "read 3000 characters") == {"url": "u", "max_length": 3000}
    declared = {**params, "properties": {**params["properties"], "max_length": {"type": "number", "default": 5000}}}
    assert lt.spare_numbers(twice, declared, "start at 5000") == {"url": "u", "start_index": 5000}


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("run it for 10 seconds in 5 steps", [10, 5]),
        ("保留 3 天，最多 1,500 条", [3, 1500]),
        ("20 km, then 20km, -4.5 degrees, 0.75 at most", [20, -4.5, 0.75]),
        ("1,2,3", [1, 2, 3]),
        ("5.0 or 5.", [5]),
        ("2024年3月5日", [2024, 3, 5]),
        ("Metona X1, v2, mp3, A_1, 2024-report.md, 2.md", []),
        ("2026-12-03 at 3:30, version 1.2.3, pages 10-20, half is 1/2", []),
        ("five results, 五个结果", [5]),
        ("Find ten major events, twenty-five links, a dozen eggs, Forty two", [10, 25, 12, 42]),
        ("前二十行，十条，三个月后，十一个人，两本书", [20, 10, 3, 11, 2]),
        ("which one? one of them; 看一下，一个，五月，星期五，十分好，第五个，一百二十个", []),
        ("give me 3 or four", [3, 4]),
        ("order 1234567890123456, 3 items, 123456789012345", [3, 123456789012345]),
        ("３天，５．５小时，－5度", [3, 5.5, -5]),
        ("1e-3 or 3e5", []),
        ("$14.99/month and $9.49/mo, not 2024/notes.md nor 3/docs/a", [14.99, 9.49]),  # a rate is a number
        (
            "100 million shares, 2.5 Billion, 3.5万人, 5万米, 2亿元",
            [100_000_000, 2_500_000_000, 35_000, 50_000, 200_000_000],
        ),
        ("1.1 million, 2.01万, 0.57亿", [1_100_000, 20_100, 57_000_000]),  # not 20099.999999999996
    ],
)
def test_the_stated_numbers_are_the_requests_own_numbers(text: str, numbers: list[float]) -> None:
    assert lt.stated_numbers(text) == numbers
    assert all(type(n) is int for n in lt.stated_numbers(text) if float(n).is_integer())


def test_arguments_cut_short_are_no_call() -> None:
    assert lt.parse_arguments('{"expression": "2 ** 16"}') == {"expression": "2 ** 16"}
    assert lt.parse_arguments('{"expression": "2 ** 1') is None
    assert lt.parse_arguments("[1, 2]") is None


def test_the_written_arguments_lose_the_tokenizers_traces_not_their_text() -> None:
    written = '{"religion": " Christianity", "f": 5.000000000000001, "n": 16, "tags": [" a "], "body": " x\\n  y "}'
    assert lt.parse_arguments(written) == {"religion": "Christianity", "f": 5.0, "n": 16, "tags": ["a"],
                                           "body": " x\n  y "}  # fmt: skip
    assert lt.parse_arguments('{"pi": 3.14159, "z": 0.1}') == {"pi": 3.14159, "z": 0.1}
    dates = '{"a": "2023-10-1", "b": "2024-5-05T09:00", "c": "2023-10-01", "d": "2023-10-1x", "e": "v2023-1-1"}'
    assert lt.parse_arguments(dates) == {"a": "2023-10-01", "b": "2024-05-05T09:00", "c": "2023-10-01",
                                         "d": "2023-10-1x", "e": "v2023-1-1"}  # fmt: skip


def test_the_prompt_lists_each_tool_on_one_line_with_its_signature() -> None:
    prompt = lt.tool_prompt(defs(CALC, WRITE))
    assert prompt.startswith("# Tools\n")  # the agent's system prompt is not part of the decision
    assert "- calculator(expression: string): Evaluate an arithmetic expression\n" in prompt
    signature = (
        "write_file(path: string, content: string, mode?: create|append, tags?: array, limit?: number, size: number)"
    )
    assert f"- {signature}: Write a UTF-8 text file in the workspace\n" in prompt
    assert lt.FORMAT in prompt and lt.GUIDANCE in prompt
    assert not re.search(r"notes|files|date|time|arithmetic", lt.GUIDANCE)  # no built-in tool's kind named
    assert lt.first_sentence("查询天气。返回温度") == "查询天气"
    assert lt.first_sentence("no stop at all") == "no stop at all"


def test_the_first_decision_shows_the_answer_examples_around_the_offered_tools_own() -> None:
    weather = {**tool("get_weather", "city"), "examples": ["Do I need an umbrella in Oslo today?", "明天杭州热吗？"]}
    calc = {**CALC, "examples": ["What is 3.5% of 1200?"]}
    prompt = lt.tool_prompt(defs(weather, WRITE, calc))
    shots = prompt.split("\n\nExamples:\n")[1].split("\n")
    first, second = lt.ANSWER_EXAMPLES
    assert shots == [
        f'{first} -> {{"tool": "answer"}}',
        'Do I need an umbrella in Oslo today? -> {"tool": "get_weather"}',  # a tool's first example
        'What is 3.5% of 1200? -> {"tool": "calculator"}',
        f'{second} -> {{"tool": "answer"}}',
    ]
    assert "Examples:" not in lt.tool_prompt(defs(weather, WRITE, calc), examples_shown=False)
    many = [{**tool(f"t{i}", "x"), "examples": [f"request {i}"]} for i in range(lt.TOOL_EXAMPLES + 2)]
    shown = lt.tool_prompt(defs(*many)).split("\n\nExamples:\n")[1]
    assert shown.count('-> {"tool": "t') == lt.TOOL_EXAMPLES and "request 0" in shown
    assert lt.examples(defs(WRITE)) == [(q, "answer") for q in lt.ANSWER_EXAMPLES]
    ordered = lt.examples(defs(weather, WRITE, calc), order=["calculator", "write_file", "get_weather"])
    assert [n for _, n in ordered] == ["answer", "calculator", "get_weather", "answer"]  # as the tools were offered


def test_the_built_in_tools_are_shown_the_examples_the_decision_had_before_they_shipped_them() -> None:
    from sidecar.agent.tools.builtin import default_registry

    tools = default_registry().definitions(["get_current_time", "calculator", "read_file", "write_file",
                                            "list_directory", "search_files", "knowledge_search"])  # fmt: skip
    before = [
        ("Explain what a hash table is.", "answer"),
        ("17% of 2350 is how much exactly?", "calculator"),
        ("我的笔记里关于季度预算写了什么？", "knowledge_search"),
        ("给“迅速”找一个近义词。", "answer"),
    ]
    order = [t.name for t in tools]
    for ranked in (tools, tools[::-1], tools[3:] + tools[:3]):
        assert lt.examples(ranked, order) == before


def test_the_built_in_tools_ship_their_examples_in_their_declaration() -> None:
    from sidecar.agent.tools.builtin import default_registry

    declared = {t.name: t.examples for t in default_registry().definitions(["calculator", "knowledge_search",
                                                                               "read_file"])}  # fmt: skip
    assert declared["calculator"] and declared["knowledge_search"] and declared["read_file"] is None


CALL = {"id": "c1", "name": "calculator", "args": {"expression": "37*43"}, "iteration": 1, "timestamp": 2}
RESULT = {
    "toolCallId": "c1",
    "toolName": "calculator",
    "result": {"value": 1591},
    "summary": "37*43 = 1591",
    "success": True,
    "durationMs": 1,
    "timestamp": 3,
}
HISTORY = [
    {"role": "user", "content": "What is 37*43?", "timestamp": 1},
    {"role": "assistant", "content": "", "toolCalls": [CALL], "timestamp": 2},
    {"role": "tool", "content": "", "toolResult": RESULT, "timestamp": 3},
]
FAILED = [*HISTORY[:2], {**HISTORY[2], "toolResult": {**RESULT, "success": False, "error": "busy"}}]
"""The same call, failed: its tool stays offered to the next decision."""


def test_the_repeat_guard_looks_at_the_current_turn_only() -> None:
    req = request(messages=HISTORY, tools=[CALC])
    assert lt.turn_calls(req.messages) == [("calculator", {"expression": "37*43"})]
    assert lt.repeated("calculator", {"expression": "37*43"}, req.messages)
    assert not lt.repeated("calculator", {"expression": "37*44"}, req.messages)
    assert not lt.repeated("write_file", {"expression": "37*43"}, req.messages)
    later = request(messages=[*HISTORY, {"role": "user", "content": "And again?", "timestamp": 4}], tools=[CALC])
    assert lt.turn_calls(later.messages) == [] and not lt.repeated("calculator", CALL["args"], later.messages)


def test_confidence_is_the_score_against_the_bar_and_no_score_is_none() -> None:
    bar = math.log(lt.NEXT_TOOL_MIN_P)
    assert lt.confident(bar) and lt.confident(0.0) and not lt.confident(bar - 0.01)
    assert not lt.confident(None) and not lt.confident(float("nan")) and not lt.confident(float("-inf"))


def test_the_tools_that_succeeded_in_this_turn_are_known() -> None:
    assert lt.succeeded(request(messages=HISTORY).messages) == {"calculator"}
    assert lt.succeeded(request(messages=FAILED).messages) == set()
    later = request(messages=[*HISTORY, {"role": "user", "content": "And again?", "timestamp": 4}])
    assert lt.succeeded(later.messages) == set()


def test_the_decision_history_folds_the_current_turn_into_its_request() -> None:
    later = [*HISTORY, {"role": "assistant", "content": "1591.", "timestamp": 4},
             {"role": "user", "content": "Now 2+2?", "timestamp": 5}]  # fmt: skip
    assert lt.decision_history(request(messages=later).messages) == [
        *lt.render_history(request(messages=HISTORY).messages),
        {"role": "assistant", "content": "1591."},
        {"role": "user", "content": "Now 2+2?"},
    ]
    (folded,) = lt.decision_history(request(messages=HISTORY).messages)
    assert folded == {
        "role": "user",
        "content": 'What is 37*43?\n\nDone so far:\n- calculator({"expression": "37*43"}) returned: 37*43 = 1591',
    }


def test_history_shows_calls_in_the_decision_format_and_results_as_tool_messages() -> None:
    rendered = lt.render_history(request(messages=HISTORY).messages)
    call = '{"tool": "calculator", "arguments": {"expression": "37*43"}}'
    assert rendered[1] == {"role": "assistant", "content": call}
    assert rendered[2] == {"role": "tool", "content": "37*43 = 1591"}


def test_the_arguments_prompt_shows_the_chosen_tool_in_full() -> None:
    prompt = lt.arguments_prompt(defs(WRITE)[0])
    assert prompt.startswith("# Tool\nwrite_file: Write a UTF-8 text file in the workspace. mode: create or append.\n")
    assert "- path (string, required): Relative path.\n" in prompt
    assert "- mode (string, one of create|append, optional): How.\n" in prompt
    assert "- tags (array of string, optional): Tags.\n" in prompt
    assert prompt.endswith(f"{lt.OPTIONAL_RULE}\n{lt.VALUE_RULE}\n{lt.FORMAT}")


def test_the_arguments_prompt_gives_numbers_written_with_a_word_of_scale_in_digits() -> None:
    asked = "What's the dividend per share with 100 million shares and a payout of 50 million USD?"
    assert lt.scaled_numbers(asked) == [("100 million", 100_000_000), ("50 million", 50_000_000)]
    prompt = lt.arguments_prompt(defs(WRITE)[0], asked)
    assert f"{lt.VALUE_RULE}\nIn digits: 100 million = 100000000; 50 million = 50000000.\n{lt.FORMAT}" in prompt
    assert lt.scaled_numbers("营收 1.5亿元") == [("1.5亿", 150_000_000)]
    assert lt.arguments_prompt(defs(WRITE)[0], "Save 100 lines") == lt.arguments_prompt(defs(WRITE)[0])


def test_the_ranking_query_is_the_request_and_the_latest_result() -> None:
    assert lt.query_text(request(messages=HISTORY).messages) == "What is 37*43?\n37*43 = 1591"
    assert lt.query_text(request(messages=HISTORY[:1]).messages) == "What is 37*43?"
    long = request(messages=[{"role": "user", "content": "x" * 5000, "timestamp": 1}]).messages
    assert lt.query_text(long) == "x" * lt.QUERY_CHARS
    assert lt.tool_summary(defs(WRITE)[0]) == "write file: Write a UTF-8 text file in the workspace"


def test_ranked_tools_go_by_similarity_and_ties_keep_the_offered_order() -> None:
    tools = defs(CALC, WRITE, TIME)
    assert [t.name for t in lt.ranked(tools, [0.1, 0.5, 0.1])] == ["write_file", "calculator", "get_current_time"]
    assert [t.name for t in lt.ranked(tools, [0.0, 0.0, 0.0])] == ["calculator", "write_file", "get_current_time"]


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        ("open budget/Q3 budget.csv and add up my spend", ["budget/Q3 budget.csv"]),
        ("save their names to events/veg list.txt", ["events/veg list.txt"]),
        ("can you open Meeting Notes/Q3 planning.md", ["Notes/Q3 planning.md"]),  # the read finds "Meeting Notes"
        ("Save the result in a file called bonus calc.txt", ["bonus calc.txt"]),
        ("Where is the function named parse defined in utils.py?", ["utils.py"]),  # a function named, not a file
        ("帮我打开 装修/预算 清单.md，加起来", ["装修/预算 清单.md"]),
        ("帮我打开装修/预算 清单.md", ["装修/预算 清单.md"]),  # a lead word glued before the folder
        ("compare src/a.md b.md", ["src/a.md", "b.md"]),  # a file before it: two names
        ("在src/目录下新建 main.py", ["src/main.py"]),  # the folder word is no part of the name
        ("在 工作/周计划 下面新建一个 第50周.md", ["工作/周计划/第50周.md"]),  # a folder by its path, no folder word
        ("create notes.md under projects/alpha", ["projects/alpha/notes.md"]),
        ("save plan.md in docs/2024.", ["docs/2024/plan.md"]),
        ("write speed.txt with the speed in km/h", ["speed.txt"]),  # a unit, not a folder
        ("read docs/guide.md in TCP/IP terms", ["docs/guide.md"]),
        ("see http://x.com/a b.md", ["b.md"]),
        ("帮我看下 待办 这个文件，还有哪几件事没做完？", ["待办"]),  # "the file 待办": no extension needed
        ("打开「随手记」这个文件", ["随手记"]),
        ("帮我看下这个文件", []),  # which file, not a name
        ("看看 照片 这个文件夹", []),
        ("装机配置 这个文件（没后缀的那个）里写了啥？", ["装机配置"]),  # the request starts with the name
        ("帮我看看 这个文件", []),  # the request starts with what it asks, not a name
        ("who's the maintainer in AUTHORS?", ["AUTHORS"]),  # a conventional name without an extension
    ],
)
def test_an_unquoted_name_with_spaces_after_its_folder_is_named_whole(text: str, paths: list[str]) -> None:
    assert lt.in_folder(lt.named_paths(text), text) == paths


def test_named_paths_are_the_file_names_a_request_spells() -> None:
    assert lt.named_paths("把“明天九点开组会”写入 reminders.md。") == ["reminders.md"]
    assert lt.named_paths("读取 notes/todo.md 并告诉我第一项任务。") == ["notes/todo.md"]
    assert lt.named_paths("Compute 19 * 23 and save the result to answer.txt.") == ["answer.txt"]
    assert lt.named_paths("Copy a.txt to ./out/b.tar.gz, then a.txt again") == ["a.txt", "./out/b.tar.gz"]
    assert lt.named_paths("帮我算一下 3.5 乘以 128, e.g. 0.85 or i.e. 2.5e3") == []  # numbers, abbreviations
    assert lt.named_paths("see https://example.com/page.html") == []
    assert lt.named_paths("Write a haiku about autumn.") == []


def test_file_names_in_any_script_with_spaces_or_without_an_extension_are_recognised() -> None:
    assert lt.named_paths("把会议要点写入会议纪要.md") == ["会议纪要.md"]  # glued to the words before it
    assert lt.named_paths("读取会议纪要.md的内容，再打开 项目 计划.md") == ["会议纪要.md", "计划.md"]
    assert lt.named_paths("把a.md和b.md合并到c.md") == ["a.md", "b.md", "c.md"]
    assert lt.named_paths("把摘要保存为“读书笔记.md”") == ["读书笔记.md"]  # quoted: taken whole
    assert lt.named_paths('Save it to "My Notes.md" please') == ["My Notes.md"]
    assert lt.named_paths("Append a line to `My Notes.md`.") == ["My Notes.md"]
    assert lt.named_paths("Open My Notes.md") == ["Notes.md"]  # unquoted and unseen: the word only
    assert lt.named_paths("Open My Notes.md", ["docs/My Notes.md", "My Notes.md"]) == ["My Notes.md"]
    assert lt.named_paths("What does the Makefile do? Update README and .env") == ["Makefile", "README", ".env"]
    assert lt.named_paths("Write the rules to `build/rules` and 'Justfile'") == ["build/rules", "Justfile"]
    assert lt.named_paths("Read data.custom") == [] and lt.named_paths("Read 'data.custom'") == ["data.custom"]
    for text in ("帮我找出工作区里所有的 .csv 文件。", "List the .md files", "Which '.pdf' files are there?"):
        assert lt.named_paths(text) == [], text  # an extension alone is a kind of file, not a name
    assert lt.named_paths("Open data/.csv and .env") == ["data/.csv", ".env"]


def test_names_that_are_not_files_are_not_taken_for_files() -> None:
    for text in ("Node.js or Vue.js, which is faster?", "Is example.com up?", "see example.com/page.html",
                 "mail bob@corp.md", "TCP/IP and/or UDP at 10 km/h", "version 1.2.3, v2.0, 3.14",
                 "Write 'hello' to the screen", "Add a TODO"):  # fmt: skip
        assert lt.named_paths(text) == [], text
    assert lt.named_paths("Open `Node.js` and src/Node.js") == ["Node.js", "src/Node.js"]  # quoted or in a folder


def test_the_files_seen_in_the_conversations_results_count_as_named() -> None:
    listing = {**RESULT, "toolName": "list_directory", "summary": "2 entries",
               "result": {"path": ".", "entries": [{"path": "notes/My Notes.md", "type": "file"},
                                                    {"path": "notes/", "type": "dir"}]}}  # fmt: skip
    messages = [
        {"role": "user", "content": "What is in notes?", "timestamp": 1},
        {"role": "assistant", "content": "", "toolCalls": [{**CALL, "name": "list_directory"}], "timestamp": 2},
        {"role": "tool", "content": "", "toolResult": listing, "timestamp": 3},
        {"role": "assistant", "content": "One file.", "timestamp": 4},
        {"role": "user", "content": "Add a line to My Notes.md", "timestamp": 5},
    ]
    req = request(messages=messages)
    assert lt.seen_files(req.messages) == ["notes/My Notes.md", "My Notes.md"]
    assert lt.request_paths(req.messages) == ["My Notes.md"]


PERMITTED_WRITE = {**WRITE, "requiresPermission": True}


def _plugin_file_tool(name: str, description: str) -> dict[str, Any]:
    return {**tool(name, "path"), "description": description, "requiresPermission": True}


def test_a_plugin_tool_that_reads_is_called_on_a_named_file_or_path_without_a_change_asked() -> None:
    info, write, mkdir, tree = defs(
        _plugin_file_tool("get_file_info", "Retrieve detailed metadata about a file or directory."),
        _plugin_file_tool("write_file", "Create a new file or completely overwrite an existing file."),
        _plugin_file_tool("create_directory", "Create a new directory or ensure a directory exists."),
        _plugin_file_tool("directory_tree", "Get a recursive tree view of files and directories."),
    )
    assert [lt.changes_things(t) for t in (info, write, mkdir, tree)] == [False, True, True, False]
    assert lt.changes_things(defs(_plugin_file_tool("gitCommit", "Record changes."))[0])

    def asked(text: str) -> Any:
        return request(messages=[{"role": "user", "content": text, "timestamp": 1}]).messages

    size = asked("帮我查下 /Users/zhou/Movies/毕业典礼.mp4 这个文件有多大")
    assert lt.grounded(info, size) and not lt.grounded(write, size)  # a read; no change was asked
    assert lt.request_paths(asked("看下 D:\\照片\\旅行\\海边.png 这张图")) == ["D:\\照片\\旅行\\海边.png"]
    blog = asked("把 /home/li/projects/blog 的整个目录结构给我看看")
    assert lt.folder_paths(blog[0].content) == ["/home/li/projects/blog"] and lt.grounded(tree, blog)
    new = asked("帮我在 /Users/xiaoming/Documents 下面新建一个文件夹，名字叫 2024年报销单")
    assert lt.grounded(mkdir, new) and not lt.grounded(write, new)  # a path, no file: only a tool on folders
    assert not lt.grounded(mkdir, blog)  # no change asked
    assert not lt.grounded(info, asked("How big are files usually?"))  # nothing named
    assert lt.folder_paths("at 60 km/h, see https://example.com/a/b and ~/code/app.") == ["~/code/app"]


def test_a_currency_is_written_as_its_code() -> None:
    convert = {
        "type": "object",
        "properties": {
            "from_currency": {"type": "string", "description": "The currency to convert from."},
            "to": {"type": "string", "description": "The target currency code."},
            "unit": {"type": "string", "description": "The currency to show.", "enum": ["dollars", "euros"]},
            "label_currency": {"type": "string", "description": "The currency's name, as shown to people."},
            "weight_unit": {"type": "string", "description": "Pounds or kilograms; the price's currency is USD."},
            "stripe_currency": {"type": "string", "description": "Three-letter ISO code, in lowercase."},
        },
    }
    args = {"from_currency": "euros", "to": "usd", "unit": "dollars", "label_currency": "euros",
            "weight_unit": "pounds", "stripe_currency": "usd"}  # fmt: skip
    assert lt.currency_codes(args, convert) == {**args, "from_currency": "EUR", "to": "USD"}
    assert lt.currency_codes({"from_currency": "人民币", "to": "Canadian dollars"}, convert) == {
        "from_currency": "CNY", "to": "CAD"}  # fmt: skip
    assert lt.currency_codes({"from_currency": "bitcoin", "to": 5}, convert) == {"from_currency": "bitcoin", "to": 5}
    assert lt.currency_codes({"from_currency": "all"}, convert) == {"from_currency": "all"}, "no currency's code"
    shown = {"type": "object", "properties": {
        "currency_symbol": {"type": "string", "description": "The symbol."},
        "currency": {"type": "string", "description": "A currency, e.g. 'usd'."}}}  # fmt: skip
    as_shown = {"currency_symbol": "dollar", "currency": "usd"}
    assert lt.currency_codes(as_shown, shown) == as_shown, "a symbol; a code in the form the description shows"


def _named(name: str, description: str = "Does what its name says.") -> MetonaToolDef:
    (made,) = defs({**tool(name, "id"), "description": description})
    return made


def test_a_tool_that_does_the_opposite_of_the_request_is_not_called() -> None:
    """Where no offered tool fitted, the model named one whose name says the opposite of what was asked ("I'd like
    to log out" → ``user_authentication_login``, "When will be sunset in Beijing today?" → ``calculate_sunrise``):
    :func:`localtools.opposed`. A state, a noun or a longer word is no ask for the opposite."""

    def opposed(name: str, text: str) -> bool:
        return lt.opposed(_named(name), request(messages=_asking(text)).messages)

    assert opposed("user_authentication_login", "I'd like to log out to go shopping. My username is 'john_doe'.")
    assert not opposed("user_authentication_login", "Log me in as john_doe")
    assert opposed("user_authentication_login", "Could you log me out? My username is JohnDoe.")
    assert not opposed("user_authentication_login", "Log out, then log in again as john_doe"), "both said"
    assert not opposed("session.login_or_logout", "I'd like to log out"), "a name holding both"
    assert opposed("calculate_sunrise", "When will be sunset in Beijing today?")
    assert opposed("calculateSunrise", "北京今天几点日落？") and not opposed("calculateSunrise", "北京几点日出？")
    assert not opposed("user_logout", "Sign me out") and opposed("user_logout", "Sign her in")
    assert opposed("auth_log_in", "Log me out") and opposed("user_sign_out", "Sign me in"), "a name's words joined"
    assert opposed("url_encode", "Decode this: a%20b") and opposed("file_decrypt", "把这个文件加密")
    for right, asked in (
        ("decode_base64", "What does this base64-encoded string say: aGVsbG8="),
        ("decrypt_file", "Open my encrypted notes file secrets.enc"), ("decrypt_file", "打开我加密的笔记"),
        ("user_logout", "帮我退出登录"), ("encrypt_file", "Encrypt decrypt.log"),
        ("get_min_price", "Find the cheapest PS5 from the highest rated seller"),
        ("unmute_microphone", "I'm on mute, fix it"), ("decrease_volume", "A sudden increase in volume, turn it down"),
        ("notes__delete_note", "Show me my note about Paris"), ("remove_background", "Make logo.png transparent"),
    ):  # fmt: skip
        assert not opposed(right, asked), (right, asked)


async def test_the_adapter_answers_where_the_tool_named_does_the_opposite() -> None:
    """The decision named a login for "log out": no arguments are written, no call is made, the answer is."""
    login = {**tool("accounts__user_login", "username"), "description": "Log a user in."}
    runtime = ScriptedRuntime(['accounts__user_login"'], ["I can't log you out; I can only log you in."])
    response, _ = await run(runtime, request(messages=_asking("I'd like to log out, please."), tools=[login]))
    assert not response.tool_calls and response.content == "I can't log you out; I can only log you in."
    assert not any("json_schema" in p for p in runtime.payloads), "no arguments written"
    runtime = ScriptedRuntime(['accounts__user_login"'], ['{"username": "john_doe"}'])
    response, _ = await run(runtime, request(messages=_asking("Log me in as john_doe."), tools=[login]))
    assert [c.name for c in response.tool_calls or ()] == ["accounts__user_login"]


def test_a_tool_with_side_effects_on_a_path_is_grounded_in_the_files_the_request_names() -> None:
    write, calc = defs(PERMITTED_WRITE, CALC)
    assert lt.names_its_file(write) and not lt.names_its_file(calc) and not lt.names_its_file(defs(WRITE)[0])
    assert lt.takes_a_file(defs(WRITE)[0]) and not lt.takes_a_file(calc)
    unnamed = request(messages=[{"role": "user", "content": "Write a haiku about autumn.", "timestamp": 1}])
    named = request(messages=[{"role": "user", "content": "Save 'hi' to notes/a.md", "timestamp": 1}])
    assert not lt.grounded(write, unnamed.messages) and lt.grounded(calc, unnamed.messages)
    assert lt.grounded(write, named.messages) and lt.request_paths(named.messages) == ["notes/a.md"]
    schema = lt.ground_arguments(lt.arguments_schema(WRITE["parameters"]), ["notes/a.md"])
    assert schema["properties"]["path"] == {"type": "string", "enum": ["notes/a.md"]}
    assert schema["properties"]["content"] == {"type": "string"} and schema["additionalProperties"] is False
    assert lt.ground_arguments(schema, []) is schema


def test_a_request_naming_a_file_no_call_was_given_is_unfinished() -> None:
    ask = {"role": "user", "content": "What is 37*43? Save it to ./out.txt", "timestamp": 1}
    assert not lt.unfinished(request(messages=[ask]).messages)  # no call yet: a first decision
    assert lt.unfinished(request(messages=[ask, *HISTORY[1:]]).messages)
    wrote = {**CALL, "id": "w", "name": "write_file", "args": {"path": "out.txt", "content": "1591"}}
    done = [*HISTORY[1:], {"role": "assistant", "content": "", "toolCalls": [wrote], "timestamp": 4}]
    assert not lt.unfinished(request(messages=[ask, *done]).messages)  # ./out.txt and out.txt are one file
    assert not lt.unfinished(request(messages=HISTORY).messages)  # names no file


def test_a_write_goes_to_the_named_files_not_yet_worked_on() -> None:
    ask = {"role": "user", "content": "Read a.txt and save a summary to b.txt", "timestamp": 1}
    assert lt.target_paths(request(messages=[ask]).messages) == ["a.txt", "b.txt"]
    read = {**CALL, "id": "r", "name": "read_file", "args": {"path": "a.txt"}}
    after = [ask, {"role": "assistant", "content": "", "toolCalls": [read], "timestamp": 2}]
    assert lt.target_paths(request(messages=after).messages) == ["b.txt"]
    wrote = {**CALL, "id": "w", "name": "write_file", "args": {"path": "b.txt", "content": "x"}}
    both = [*after, {"role": "assistant", "content": "", "toolCalls": [wrote], "timestamp": 3}]
    assert lt.target_paths(request(messages=both).messages) == ["a.txt", "b.txt"]  # all worked on: any of them


def test_a_tool_is_worth_calling_when_near_what_the_request_asks_or_the_model_is_sure_of_it() -> None:
    assert lt.relevant(lt.RELEVANT_COSINE, None) and lt.relevant(0.0, math.log(lt.RELEVANT_P))
    assert not lt.relevant(lt.RELEVANT_COSINE - 0.01, math.log(lt.RELEVANT_P) - 0.01)
    assert not lt.relevant(None, None) and not lt.relevant(0.0, float("nan"))
    assert not lt.relevant(0.9, math.log(lt.RELEVANT_FLOOR) - 0.01)  # the model did not want that name
    assert lt.relevant(0.9, math.log(lt.RELEVANT_FLOOR)) and lt.relevant(0.9, None)
    answer = math.log(0.4)
    assert lt.worth_calling(answer, answer + lt.CALL_MARGIN + 1e-9, lt.RELEVANT_COSINE)
    assert not lt.worth_calling(answer, answer + lt.CALL_MARGIN - 0.01, lt.RELEVANT_COSINE)
    assert not lt.worth_calling(answer, answer + lt.CALL_MARGIN + 1e-9, lt.RELEVANT_COSINE - 0.01), "far"
    assert lt.worth_calling(answer, answer + lt.NEAR_MARGIN + 1e-9, lt.NEAR_COSINE), "near: a wider margin"
    assert not lt.worth_calling(answer, answer + lt.NEAR_MARGIN - 0.01, 0.9)
    assert not lt.worth_calling(answer, answer + lt.NEAR_MARGIN + 1e-9, lt.NEAR_COSINE - 0.01)
    assert not lt.worth_calling(None, answer, 0.9) and not lt.worth_calling(answer, float("-inf"), 0.9)
    assert not lt.worth_calling(answer, answer, None)
    assert lt.worth_calling(answer, answer + lt.NEAR_MARGIN + 1e-9, 0.0, commanded=True), "its verb: however far"
    assert not lt.worth_calling(answer, answer + lt.NEAR_MARGIN - 0.01, 0.0, commanded=True)
    assert lt.choice_regex(["read_file"], answer=False) == '(read_file)"'
    names = ["search_nodes", "read_graph", "open_nodes"]
    assert lt.begins_with_its_verb("Search my memory for anything about sourdough.", "search_nodes", names)
    assert not lt.begins_with_its_verb("Search my memory for sourdough.", "search_nodes", [*names, "search_files"])
    assert not lt.begins_with_its_verb("What is in my memory?", "search_nodes", names)
    assert lt.begins_with_its_verb("Please search our memory for X", "memory__search_nodes", ["memory__search_nodes"])
    for not_a_command, name in (("Find the derivative of x^2", "find_restaurants"),
                                ("Generate a list of names for my cat", "generate_image"),
                                ("Play a word game with me", "play_music"), ("Slack is so distracting", "slack_send"),
                                ("Create a workout plan for me", "create_event")):  # fmt: skip
        assert not lt.begins_with_its_verb(not_a_command, name, [name]), not_a_command
    for bare, name in (("Check my essay for grammar", "check_weather"), ("Tell my boss I'm sick", "tell_joke"),
                       ("Run my numbers by me", "run_tests")):  # fmt: skip
        assert not lt.begins_with_its_verb(bare, name, [name]), bare
    assert lt.begins_with_its_verb("Can you please search through my notes for X", "search_notes", ["search_notes"])
    assert not lt.begins_with_its_verb("搜索我的记忆", "search_nodes", names)


async def test_a_command_with_the_tools_own_verb_is_done_where_the_model_would_answer() -> None:
    """ "Search my memory for anything about sourdough." offered a memory server's tools: the 0.5B model answered it
    (p 0.52); the second look's search_nodes, as likely as the answer and far by the embedder, is called."""
    search = {**tool("search_nodes", "query"), "description": "Search for nodes in the knowledge graph."}
    graph = {**tool("read_graph", "query"), "description": "Read the entire knowledge graph."}
    asking = _asking("Search my memory for anything about sourdough.")
    runtime = ScriptedRuntime(['answer"'], ['search_nodes"'], ['{"query": "sourdough"}'])
    response, _ = await run(runtime, request(messages=asking, tools=[search, graph]))
    assert [(c.name, c.args) for c in response.tool_calls or ()] == [("search_nodes", {"query": "sourdough"})]
    runtime = ScriptedRuntime(['answer"'], ['search_nodes"'], ["Sourdough is a bread."])
    response, _ = await run(runtime, request(messages=_asking("Sourdough: what is it?"), tools=[search, graph]))
    assert not response.tool_calls and response.content == "Sourdough is a bread.", "no command: answered"


def _prompts(*paths: str) -> list[str]:
    """The ``prompt`` of every case in these JSON-lines files (relative to the project root)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    return [
        json.loads(line)["prompt"] for path in paths for line in (root / path).open(encoding="utf-8") if line.strip()
    ]


def _measured_prompts() -> list[str]:
    return _prompts(
        "datasets/agent-core-v1/cases.jsonl",
        "datasets/agent-bilingual-v1/cases.jsonl",
        "tests/fixtures/tool_decisions_heldout.jsonl",
    )


def _held_out_agent_prompts() -> list[str]:
    """agent-bilingual-v2's prompts: the held-out set, checked here but never printed."""
    return _prompts("datasets/agent-bilingual-v2/cases.jsonl")


def _examples() -> list[str]:
    """The decision's answer examples and every built-in tool's examples."""
    from sidecar.agent.tools.builtin import default_registry

    registry = default_registry()
    shipped = [q for t in registry.definitions(registry.names()) for q in t.examples or ()]
    return [*lt.ANSWER_EXAMPLES, *shipped]


def test_no_example_is_a_benchmark_or_held_out_request() -> None:
    assert len(_examples()) > len(lt.ANSWER_EXAMPLES)
    assert not set(_examples()) & set(_measured_prompts())
    assert not set(_examples()) & set(_held_out_agent_prompts())


def test_no_example_paraphrases_a_benchmark_or_held_out_request() -> None:
    """With the decision's own embedder, no example is as near to a measured request as a paraphrase is
    ("src 目录包含哪些文件？" beside "src 目录下都有什么文件？" was 0.91, an example of the router removed on
    2026-12-03 with the router itself)."""
    from sidecar.embeddings import default_embedder

    prompts = _measured_prompts()
    examples = _examples()
    vectors = default_embedder().embed([*examples, *prompts])
    cosine = vectors[: len(examples)] @ vectors[len(examples) :].T
    nearest = {examples[i]: prompts[int(cosine[i].argmax())] for i in range(len(examples)) if cosine[i].max() >= 0.7}
    assert nearest == {}
    held_out = default_embedder().embed(_held_out_agent_prompts())
    near_held_out = [examples[i] for i in range(len(examples)) if (vectors[i] @ held_out.T).max() >= 0.7]
    assert near_held_out == []  # the held-out prompt itself is not printed


# ---- the adapter's steps -------------------------------------------------------------------------------------


class ScriptedRuntime:
    """One list of text pieces per generation, in order; records every payload."""

    def __init__(
        self,
        *scripts: list[str],
        score: float = -0.1,
        arguments_finish: str = "stop",
        fits: str | Sequence[str] = "yes",
        choose: str | Sequence[str] | None = None,
    ) -> None:
        self.scripts = list(scripts)
        self.score = score
        self.arguments_finish = arguments_finish
        """What an arguments step's result reports as its ``finish`` (``length``, ``loop``)."""
        """What a decision's result reports as its ``score`` (the model's log-probability of the name)."""
        self.payloads: list[dict[str, Any]] = []
        self.fits = [fits] if isinstance(fits, str) else list(fits)
        """The answers to the second opinions on an unsure pick (:data:`lt.FITS_PROMPT`) in turn, the last one to
        every further one; kept apart from the scripts: its payloads go to :attr:`fits_payloads`."""
        self.fits_payloads: list[dict[str, Any]] = []
        self.choose = [choose] if choose is None or isinstance(choose, str) else list(choose)
        """The answers to the choices among an unsure pick's lookalikes after a ``yes`` (:data:`lt.CHOOSE_PROMPT`)
        in turn, the last one to every further one; by default (None) the pick."""

    def loaded_info(self, model_path: str | None) -> dict[str, Any] | None:
        return {"meta": {"context_window": 4096}}

    async def generate(self, payload: dict[str, Any], on_delta: Any, *, model_path: str | None = None) -> dict:
        if payload.get("prefix") == lt.FITS_PREFIX or (
            payload.get("prefix") == lt.CHOOSE_PREFIX and "score" not in payload
        ):
            self.fits_payloads.append(payload)
            if payload["prefix"] == lt.FITS_PREFIX:
                label = self.fits.pop(0) if len(self.fits) > 1 else self.fits[0]
            else:  # among lookalikes, after a yes: ``choose``, or the pick (listed first)
                chosen = self.choose.pop(0) if len(self.choose) > 1 else self.choose[0]
                label = chosen or payload["regex"][1:].split("|")[0]
            await on_delta(label + '"')
            return {"input_tokens": 100, "output_tokens": 2, "finish": "stop", "tokens_per_s": 20.0, "ttft_ms": 300}
        self.payloads.append(payload)
        for piece in self.scripts.pop(0):
            await on_delta(piece)
        score = {"score": self.score} if payload.get("score") else {}
        return {
            "input_tokens": 100,
            "output_tokens": 5,
            "finish": self.arguments_finish if "json_schema" in payload else "stop",
            "tokens_per_s": 20.0,
            "ttft_ms": 300,
            **score,
        }


def local(runtime: ScriptedRuntime, embedder: FavouringEmbedder | None = None) -> LocalAdapter:
    config = ProviderConfig(
        provider_id="local", preset="local", protocol="local", base_url="local://embedded", options={}
    )
    return LocalAdapter(config, runtime=runtime, embedder=embedder or FavouringEmbedder())


async def run(
    runtime: ScriptedRuntime, req: MetonaRequest, embedder: FavouringEmbedder | None = None
) -> tuple[Any, list[Any]]:
    events: list[Any] = []
    response = await local(runtime, embedder).send_stream(req, events.append)
    return response, events


GIB = 1024**3


@pytest.mark.parametrize(
    ("installed", "memory", "options", "slot"),
    [(True, 16 * GIB, {}, "arguments"), (False, 16 * GIB, {}, None),
     (True, 16 * GIB, {"arguments_model": "same"}, None), (True, 16 * GIB, {"model_path": "/models/o.gguf"}, None),
     (True, 8 * GIB, {}, None), (True, None, {}, None),
     (True, 8 * GIB, {"arguments_model": "always"}, "arguments"),
     (False, 8 * GIB, {"arguments_model": "always"}, None)],
)  # fmt: skip
async def test_the_arguments_are_written_by_the_arguments_model_when_it_is_installed(
    monkeypatch: pytest.MonkeyPatch, installed: bool, memory: int | None, options: dict[str, Any], slot: str | None
) -> None:
    """The decision stays on the model that was asked; only the arguments step names the ``arguments`` slot — not
    when the larger model is missing, switched off, the host configured its own GGUF, or (by default) the machine
    has less than 12 GiB of memory."""
    from sidecar.localmodel import assets

    monkeypatch.setattr(assets, "arguments_status", lambda: (installed, None if installed else "missing"))
    monkeypatch.setattr(assets, "physical_memory", lambda: memory)
    runtime = ScriptedRuntime(["calc", 'ulator"'], ['{"expression": ', '"2 ** 16"}'])
    config = ProviderConfig(
        provider_id="local", preset="local", protocol="local", base_url="local://embedded", options=options
    )
    response = await LocalAdapter(config, runtime=runtime, embedder=FavouringEmbedder()).send_stream(
        request(tools=[CALC, WRITE]), lambda e: None
    )
    assert response.tool_calls and response.tool_calls[0].args == {"expression": "2 ** 16"}
    decision, arguments = runtime.payloads
    assert "slot" not in decision and arguments.get("slot") == slot


@pytest.mark.parametrize("code", ["model_unavailable", "runtime_error", "worker_died"])
async def test_an_arguments_model_that_cannot_load_leaves_the_arguments_to_the_deciding_model(
    monkeypatch: pytest.MonkeyPatch, code: str
) -> None:
    """A damaged part, a failed conversion or a worker killed while on the larger model is no failed call: the same
    step runs on the model that decided, and later calls no longer ask for the larger one."""
    from sidecar.localmodel import assets
    from sidecar.localmodel.client import LocalModelError

    monkeypatch.setattr(assets, "arguments_status", lambda: (True, None))
    monkeypatch.setattr(assets, "physical_memory", lambda: 16 * GIB)

    class NoArgumentsModel(ScriptedRuntime):
        async def generate(self, payload: dict[str, Any], on_delta: Any, *, model_path: str | None = None) -> dict:
            if payload.get("slot") == "arguments":
                self.payloads.append(payload)
                raise LocalModelError(code, "the arguments model failed")
            return await super().generate(payload, on_delta, model_path=model_path)

    runtime = NoArgumentsModel(["calc", 'ulator"'], ['{"expression": ', '"2 ** 16"}'], ["calc", 'ulator"'], ["{}"])
    adapter = local(runtime)
    first = await adapter.send_stream(request(tools=[CALC, WRITE]), lambda e: None)
    assert first.tool_calls and first.tool_calls[0].args == {"expression": "2 ** 16"}
    assert [p.get("slot") for p in runtime.payloads] == [None, "arguments", None]
    runtime.payloads.clear()
    await adapter.send_stream(request(tools=[CALC, WRITE]), lambda e: None)
    assert [p.get("slot") for p in runtime.payloads] == [None, None]


async def test_a_tool_decision_then_schema_constrained_arguments_make_one_call() -> None:
    runtime = ScriptedRuntime(["calc", 'ulator"'], ['{"expression": ', '"2 ** 16"}'])
    response, events = await run(runtime, request(tools=[CALC, WRITE]))
    assert [e.type.value for e in events] == ["tool_call_complete", "usage", "done"]  # nothing of the steps shown
    assert response.tool_calls and response.tool_calls[0].name == "calculator"
    assert response.tool_calls[0].args == {"expression": "2 ** 16"}
    decision, arguments = runtime.payloads
    assert "tools" not in decision and decision["regex"] == lt.choice_regex(["calculator", "write_file"])
    assert decision["prefix"] == lt.DECISION_PREFIX and decision["stop"] == ['"'] and decision["score"] is True
    system = decision["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("# Tools\n- calculator(")
    assert system["content"] == lt.tool_prompt(defs(CALC, WRITE))  # the first decision: with the examples
    assert "You are Metona." not in system["content"]
    assert arguments["prefix"] == '{"tool": "calculator", "arguments": '
    assert arguments["json_schema"]["required"] == ["expression"]
    assert arguments["messages"][0] == {"role": "system", "content": lt.arguments_prompt(defs(CALC)[0])}
    assert arguments["messages"][1:] == decision["messages"][1:]
    assert response.usage.input_tokens == 200 and response.usage.output_tokens == 10


async def test_the_decision_lists_the_tools_most_similar_to_the_request_first() -> None:
    embedder = FavouringEmbedder("write file")
    runtime = ScriptedRuntime(['answer"'], ["Hi."])
    await run(runtime, request(messages=FAILED, tools=[CALC, WRITE]), embedder)
    assert embedder.calls == [["What is 37*43?\n37*43 = 1591", "calculator: Evaluate an arithmetic expression", ANY]]
    decision = runtime.payloads[0]
    assert decision["regex"] == lt.choice_regex(["write_file", "calculator"])
    assert decision["messages"][0]["content"].index("- write_file(") < decision["messages"][0]["content"].index(
        "- calculator("
    )


async def test_the_tools_are_embedded_once_per_adapter_and_the_request_at_every_decision() -> None:
    embedder = FavouringEmbedder("write file")
    adapter = local(
        ScriptedRuntime(['answer"'], ['calculator"'], ["Hi."], ['answer"'], ['calculator"'], ["Hi."]), embedder
    )
    for question in ("first question", "second question"):
        await adapter.send_stream(request(messages=[{"role": "user", "content": question, "timestamp": 1}],
                                          tools=[CALC, WRITE]), lambda e: None)  # fmt: skip
    tools = ["calculator: Evaluate an arithmetic expression", ANY]
    assert embedder.calls == [["first question", *tools], ["second question"]]
    assert adapter.runtime.payloads[3]["regex"] == lt.choice_regex(["write_file", "calculator"])


async def test_a_tool_without_parameters_is_called_with_no_arguments_generation() -> None:
    runtime = ScriptedRuntime(['get_current_time"'])
    response, _ = await run(runtime, request(tools=[CALC, TIME]))
    assert response.tool_calls and response.tool_calls[0].name == "get_current_time"
    assert response.tool_calls[0].args == {} and len(runtime.payloads) == 1


async def test_an_answer_decision_streams_a_plain_answer_without_tools() -> None:
    runtime = ScriptedRuntime(['answer"'], ['calculator"'], ["Bon", "jour."])
    hello = [{"role": "user", "content": "How do you say hello in French", "timestamp": 1}]
    response, events = await run(runtime, request(messages=hello, tools=[CALC]))
    assert [e.type.value for e in events] == ["text_delta", "text_delta", "usage", "done"]
    assert response.content == "Bonjour." and response.tool_calls is None
    _decision, _second_look, answer = runtime.payloads
    assert "tools" not in answer and "regex" not in answer and "json_schema" not in answer and "prefix" not in answer
    assert answer["messages"][-1] == {"role": "user", "content": "How do you say hello in French"}


async def test_after_a_result_the_decision_sees_what_was_done_and_may_chain_another_tool() -> None:
    runtime = ScriptedRuntime(['get_current_time"'])
    response, _ = await run(runtime, request(messages=HISTORY, tools=[CALC, TIME]))
    assert response.tool_calls and response.tool_calls[0].name == "get_current_time"
    decision = runtime.payloads[0]
    assert [m["role"] for m in decision["messages"]] == ["system", "user"]
    done = '- calculator({"expression": "37*43"}) returned: 37*43 = 1591'
    assert decision["messages"][1]["content"] == f"What is 37*43?\n\nDone so far:\n{done}"
    assert decision["regex"] == lt.choice_regex(["calculator", "get_current_time"])  # still offered: below
    assert decision["messages"][0]["content"] == lt.tool_prompt(defs(CALC, TIME), examples_shown=False)


async def test_after_a_result_naming_the_tool_that_succeeded_gives_the_answer() -> None:
    runtime = ScriptedRuntime(['calculator"'], ["It is 1591."])
    response, _ = await run(runtime, request(messages=HISTORY, tools=[CALC, TIME]))
    assert response.tool_calls is None and response.content == "It is 1591."
    assert "regex" not in runtime.payloads[1]
    runtime = ScriptedRuntime(['calculator"'], ['{"expression": "37*44"}'])  # it failed: it may be called again
    failed = [{**FAILED[0], "content": "What is 37*43, or 37*44?"}, *FAILED[1:]]
    response, _ = await run(runtime, request(messages=failed, tools=[CALC, TIME]))
    assert response.tool_calls and response.tool_calls[0].args == {"expression": "37*44"}


async def test_after_a_result_an_unsure_next_tool_gives_the_answer_instead() -> None:
    runtime = ScriptedRuntime(['write_file"'], ["It is 1591."], score=math.log(lt.NEXT_TOOL_MIN_P) - 0.01)
    response, _ = await run(runtime, request(messages=HISTORY, tools=[CALC, WRITE]))
    assert response.tool_calls is None and response.content == "It is 1591."
    assert (
        "regex" not in runtime.payloads[1]
        and "returned: 37*43 = 1591" in runtime.payloads[1]["messages"][-1]["content"]
    )


async def test_a_tool_far_from_the_request_that_the_model_is_unsure_of_is_not_called() -> None:
    unsure = math.log(lt.RELEVANT_P) - 0.1
    runtime = ScriptedRuntime(['calculator"'], ["Hello."], score=unsure)
    response, _ = await run(runtime, request(tools=[CALC, WRITE]))  # every tool at cosine 0 with the request
    assert response.tool_calls is None and response.content == "Hello."
    runtime = ScriptedRuntime(['calculator"'], ['{"expression": "2 ** 16"}'], score=unsure)
    response, _ = await run(runtime, request(tools=[CALC, WRITE]), FavouringEmbedder("calculator"))
    assert response.tool_calls and response.tool_calls[0].name == "calculator"  # near what it does: called
    runtime = ScriptedRuntime(['calculator"'], ['{"expression": "2 ** 16"}'])
    response, _ = await run(runtime, request(tools=[CALC, WRITE]))
    assert response.tool_calls and response.tool_calls[0].name == "calculator"  # far, but the model is sure


async def test_a_far_unsure_choice_gives_way_to_a_nearer_tool_that_is_near_the_request() -> None:
    class Orthogonal(FavouringEmbedder):
        """The request and the calculator's summary at cosine 1, every other text at 0 with both."""

        def embed(self, texts: list[str]) -> np.ndarray:
            return np.array([[1.0, 0.0] if i == 0 or t.startswith("calculator") else [0.0, 1.0]
                             for i, t in enumerate(texts)])  # fmt: skip

    far = math.log(lt.RELEVANT_P) - 0.1  # write_file: unsure, and far from the request
    runtime = ScriptedRuntime(['write_file"'], ['{"expression": "2 ** 16"}'], score=far)
    response, _ = await run(runtime, request(tools=[CALC, WRITE]), Orthogonal())
    assert response.tool_calls and response.tool_calls[0].name == "calculator"
    assert runtime.payloads[1]["prefix"] == '{"tool": "calculator", "arguments": '
    assert not lt.relevant(0.0, far) and not lt.relevant(0.0, far, lt.RELEVANT_COSINE - 0.01)
    assert lt.relevant(0.0, far, lt.RELEVANT_COSINE)
    assert not lt.relevant(0.0, math.log(lt.RELEVANT_FLOOR) - 1, 1.0)  # a name the model never wanted: answered


def test_an_unsure_choice_gives_way_to_a_clearly_nearer_tool() -> None:
    unsure, sure = math.log(lt.NEARER_P) - 0.01, math.log(lt.NEARER_P)
    assert lt.nearer("a", {"a": 0.1, "b": 0.1 + lt.NEARER_GAP}, unsure) == "b"
    assert lt.nearer("a", {"a": 0.1, "b": 0.1 + lt.NEARER_GAP}, None) == "b"  # no score: no confidence
    assert lt.nearer("a", {"a": 0.1, "b": 0.1 + lt.NEARER_GAP}, sure) is None
    assert lt.nearer("a", {"a": 0.1, "b": 0.19}, unsure) is None
    assert lt.nearer("a", {"a": 0.4, "b": 0.1}, unsure) is None
    assert lt.nearer("a", {"a": 0.4}, unsure) is None


def test_an_unsure_pick_the_request_does_not_name_gives_way_to_the_one_it_names_by_two_words() -> None:
    unsure, sure = math.log(lt.NEARER_P) - 0.01, math.log(lt.NEARER_P)
    named = {"flights": set(), "attractions": {"attraction", "children"}, "hotels": set()}
    assert lt.named_instead("flights", named, unsure) == "attractions"
    assert lt.named_instead("flights", named, sure) is None  # the model sure of its own
    assert lt.named_instead("flights", {**named, "attractions": {"find"}}, unsure) is None  # one word: a verb, often
    assert lt.named_instead("flights", {**named, "hotels": {"hotel", "room"}}, unsure) is None  # two named: which?
    assert lt.named_instead("hotels", {**named, "hotels": {"hotel"}}, unsure) is None  # the pick is named itself
    redis = {"set": set(), "get": set(), "expire": {"expire"}}  # "make session:9f3 expire in 30 min"
    assert lt.named_instead("set", redis, unsure, said=["expire"]) == "expire"  # one word, the tool's whole name
    assert (
        lt.named_instead("set", redis, unsure) is None and lt.named_instead("set", redis, sure, said=["expire"]) is None
    )
    expire = _named("expire", "Set a timeout on a key")
    assert lt.says_its_name(expire, "make session:9f3 expire in 30 min")
    for text in ("when does session:9f3 expire?", "open expire/notes.txt", "post 'keys expire soon' to #ops",
                 "what does expire-at mean"):  # fmt: skip
        assert not lt.says_its_name(expire, text), text
    tools = defs(
        {**tool("find_flights", "city"), "description": "Search round-trip flights between two airports."},
        {**tool("find_attractions", "city"), "description": "Find attractions in a city suitable for children."},
    )
    asked = "get a list of attractions in Paris that are suitable for children?"
    words = lt.named_by(tools, asked)
    assert words == {"find_flights": set(), "find_attractions": {"attraction", "children", "suitable"}}


async def test_the_adapter_calls_the_tool_the_request_names_when_the_model_is_unsure_of_another() -> None:
    flights = {**tool("find_flights", "city"), "description": "Search round-trip flights between two airports."}
    sights = {**tool("find_attractions", "city"), "description": "Find attractions in a city suitable for children."}
    asked = _asking("get a list of attractions in Paris that are suitable for children?")
    unsure = math.log(lt.NEARER_P) - 0.01
    runtime = ScriptedRuntime(['find_flights"'], ['{"city": "Paris"}'], score=unsure)
    response, _ = await run(runtime, request(messages=asked, tools=[flights, sights]))
    assert response.tool_calls and response.tool_calls[0].name == "find_attractions"
    assert runtime.payloads[1]["prefix"] == '{"tool": "find_attractions", "arguments": '


async def test_the_adapter_calls_the_nearer_tool_when_the_model_is_unsure_of_its_own() -> None:
    unsure = math.log(lt.NEARER_P) - 0.01
    runtime = ScriptedRuntime(['write_file"'], ['{"expression": "2 ** 16"}'], score=unsure)
    response, _ = await run(runtime, request(tools=[CALC, WRITE]), Halfway())
    assert response.tool_calls and response.tool_calls[0].name == "calculator"
    assert runtime.payloads[1]["prefix"] == '{"tool": "calculator", "arguments": '
    runtime = ScriptedRuntime(['get_current_time"'])  # the model sure of it: kept
    response, _ = await run(runtime, request(tools=[CALC, TIME]), Halfway())
    assert response.tool_calls and response.tool_calls[0].name == "get_current_time"
    runtime = ScriptedRuntime(['get_current_time"'], ['{"expression": "2 ** 16"}'], score=unsure)
    response, _ = await run(runtime, request(tools=[CALC, TIME]), Halfway())
    assert response.tool_calls and response.tool_calls[0].name == "calculator"


NOTES_SEARCH = {**tool("notes_search", "query"), "description": "Search the user's notes for passages."}
FIND = {
    **tool("find_in_files", "query"),
    "description": "Find which files in a folder mention a text.",
    "parameters": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Text."},
            "path": {"type": "string", "description": "Folder."},
        },
        "required": ["query"],
    },
}


def _asking(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text, "timestamp": 1}]


def test_a_request_that_speaks_of_files_or_folders_is_for_the_tools_that_work_on_them() -> None:
    tools = defs(NOTES_SEARCH, FIND, CALC, PERMITTED_WRITE)
    for text in ("Which of my files mention Falcon?", "哪些文件里写了 合同到期？", "Search the docs folder for TODO",
                 "在 笔记 目录里找找 TODO"):  # fmt: skip
        assert [t.name for t in lt.spoken_of_files(tools, request(messages=_asking(text)).messages)] == [
            "find_in_files"
        ]  # a write only when the request asks for a change
    for text in ("What did I note about Falcon?", "我的笔记里怎么说咖啡豆的？", "What is 2 ** 16?"):
        assert lt.spoken_of_files(tools, request(messages=_asking(text)).messages) == []
    assert (
        lt.spoken_of_files(defs(NOTES_SEARCH, CALC), request(messages=_asking("Which file mentions X?")).messages) == []
    )


async def test_an_unsure_pick_that_works_on_no_file_is_decided_again_for_a_request_about_files() -> None:
    asking = _asking("Which of my files mention Falcon?")
    unsure = math.log(lt.NEARER_P) - 0.01
    runtime = ScriptedRuntime(['notes_search"'], ['find_in_files"'], ['{"query": "Falcon"}'], score=unsure)
    response, _ = await run(runtime, request(messages=asking, tools=[NOTES_SEARCH, FIND]), FavouringEmbedder("find"))
    assert response.tool_calls and response.tool_calls[0].name == "find_in_files"
    again = runtime.payloads[1]
    assert again["regex"] == lt.choice_regex(["find_in_files"]) and again["messages"] == runtime.payloads[0]["messages"]
    runtime = ScriptedRuntime(['notes_search"'], ['{"query": "Falcon"}'])  # the model sure of it: kept (unless the
    files = _asking("Is Falcon in any of my files?")  # request asks which files: the answer is files)
    response, _ = await run(runtime, request(messages=files, tools=[NOTES_SEARCH, FIND]), FavouringEmbedder("notes"))
    assert response.tool_calls and response.tool_calls[0].name == "notes_search"
    notes = _asking("What did I note about Falcon?")  # no file spoken of: kept, however unsure
    runtime = ScriptedRuntime(['notes_search"'], ['{"query": "Falcon"}'], score=unsure)
    response, _ = await run(runtime, request(messages=notes, tools=[NOTES_SEARCH, FIND]), FavouringEmbedder("notes"))
    assert response.tool_calls and response.tool_calls[0].name == "notes_search"


async def test_a_pick_chosen_again_for_a_request_about_files_is_near_enough_and_a_folder_overrules_a_sure_pick() -> (
    None
):
    far = math.log(lt.RELEVANT_P) - 1  # both picks unsure, the second far from the request by the embedder
    asking = _asking("哪些文件里提到了“年终奖”？")
    runtime = ScriptedRuntime(['notes_search"'], ['find_in_files"'], ['{"query": "年终奖"}'], score=far)
    response, _ = await run(runtime, request(messages=asking, tools=[NOTES_SEARCH, FIND]), FavouringEmbedder("notes"))
    assert response.tool_calls and response.tool_calls[0].name == "find_in_files"  # the request spoke of its files
    folder = _asking('search the recipes folder for "cardamom"')  # a folder: no notes search looks in one
    runtime = ScriptedRuntime(['notes_search"'], ['find_in_files"'], ['{"query": "cardamom"}'])
    response, _ = await run(runtime, request(messages=folder, tools=[NOTES_SEARCH, FIND]), FavouringEmbedder("notes"))
    assert response.tool_calls and response.tool_calls[0].name == "find_in_files"
    assert runtime.payloads[1]["regex"] == lt.choice_regex(["find_in_files"])
    assert lt.speaks_of_folders("在 合同 文件夹里找找") and not lt.speaks_of_folders("Which of my files mention X?")


async def test_a_request_asking_which_files_overrules_a_sure_pick_that_works_on_none() -> None:
    asking = _asking("哪些文件里写了“报销”？")
    runtime = ScriptedRuntime(['notes_search"'], ['find_in_files"'], ['{"query": "报销"}'])  # sure of each
    response, _ = await run(runtime, request(messages=asking, tools=[NOTES_SEARCH, FIND]), FavouringEmbedder("notes"))
    assert response.tool_calls and response.tool_calls[0].name == "find_in_files"
    assert lt.asks_which_files("Which of my markdown files mention Kubernetes?")
    assert lt.asks_which_files("A file of mine mentions the lease — which one is it?")
    assert lt.asks_which_files("哪个文件提到了王经理的电话？") and not lt.asks_which_files("我的笔记里写了什么？")


async def test_a_request_asking_which_file_is_not_answered_by_reading_a_file_the_model_names() -> None:
    from sidecar.agent.tools.builtin import default_registry

    tools = [t.model_dump(mode="json", by_alias=True, exclude_none=True)
             for t in default_registry().definitions(["read_file", "search_files"])]  # fmt: skip
    asking = _asking("Which file did I write the boat's mooring number in?")
    runtime = ScriptedRuntime(['read_file"'], ['search_files"'], ['{"query": "mooring"}'])  # sure of each
    response, _ = await run(runtime, request(messages=asking, tools=tools), FavouringEmbedder("read"))
    assert response.tool_calls and response.tool_calls[0].name == "search_files"
    assert runtime.payloads[1]["regex"] == lt.choice_regex(["search_files"])  # no one-file read among them
    reading = _asking("What does the mooring.txt file say about the boat?")  # a file named: read, not asked again
    runtime = ScriptedRuntime(['read_file"'], ['{"path": "mooring.txt"}'])
    response, _ = await run(runtime, request(messages=reading, tools=tools), FavouringEmbedder("read"))
    assert response.tool_calls and response.tool_calls[0].name == "read_file"


async def test_a_pick_about_folders_itself_is_kept_for_a_request_about_folders() -> None:
    allowed = {
        **tool("list_allowed_directories"),
        "description": "Returns the list of directories that this server is allowed to access.",
        "parameters": {"type": "object", "properties": {}},
    }
    lister = {**tool("list_directory", "path"), "description": "List a workspace folder."}
    runtime = ScriptedRuntime(['list_allowed_directories"'])  # sure; a request about folders
    response, _ = await run(runtime, request(messages=_asking("你能访问哪些目录？"), tools=[allowed, lister]))
    assert response.tool_calls and response.tool_calls[0].name == "list_allowed_directories"
    assert len(runtime.payloads) == 1  # not decided again among the tools with a path
    assert not lt.about_files_itself(defs(NOTES_SEARCH)[0])


def test_a_request_looking_for_a_text_in_files_is_not_for_a_listing_or_a_one_file_read() -> None:
    from sidecar.agent.tools.builtin import default_registry

    tools = default_registry().definitions(["read_file", "list_directory", "search_files", "knowledge_search"])

    def among(text: str) -> list[str]:
        return [t.name for t in lt.finding(lt.spoken_of_files(tools, request(messages=_asking(text)).messages), text)]

    assert among("哪些文件里写了“报销”？") == among("归档 文件夹里有哪些文件提到了预算？") == ["search_files"]
    assert among("Which files in the docs folder mention OAuth?") == ["search_files"]
    assert among("What files are in the invoices folder?") == ["read_file", "list_directory", "search_files"]
    assert among("Tell me about the files in the invoices folder") == ["search_files"]
    assert among("Which file did I put the wifi password in?") == ["list_directory", "search_files"]
    assert among('List everything in the "Tax Return 2024" folder.') == among("「学习资料」文件夹里现在都放了些什么？")
    assert "list_directory" in among("「学习资料」文件夹里现在都放了些什么？")  # a quoted folder: no text to find
    assert lt.looks_for_text('search the recipes folder for "cardamom"')


async def test_a_pick_that_works_on_files_is_kept_for_a_request_that_looks_for_a_text() -> None:
    from sidecar.agent.tools.builtin import default_registry

    tools = [t.model_dump(mode="json", by_alias=True, exclude_none=True)
             for t in default_registry().definitions(["list_directory", "search_files"])]  # fmt: skip
    ask = _asking("Tell me about the files in the docs folder")  # "about": a text to look for, were it decided again
    runtime = ScriptedRuntime(['list_directory"'], ['{"path": "docs"}'], score=math.log(lt.NEARER_P) - 0.01)
    response, _ = await run(runtime, request(messages=ask, tools=tools), FavouringEmbedder("list"))
    assert response.tool_calls and response.tool_calls[0].name == "list_directory"
    assert runtime.payloads[1]["prefix"] == '{"tool": "list_directory", "arguments": '


async def test_a_search_picked_for_what_a_named_folder_holds_lists_the_folder() -> None:
    from sidecar.agent.tools.builtin import default_registry

    tools = [t.model_dump(mode="json", by_alias=True, exclude_none=True)
             for t in default_registry().definitions(["read_file", "list_directory", "search_files"])]  # fmt: skip
    asks = (("照片整理 这个文件夹里都有啥", "照片整理"), ("「学习资料」文件夹里现在都放了些什么？", "学习资料"))
    for ask, folder in asks:
        runtime = ScriptedRuntime(['search_files"'], ['{"path": "' + folder + '"}'])
        response, _ = await run(runtime, request(messages=_asking(ask), tools=tools), FavouringEmbedder("search"))
        assert response.tool_calls and (response.tool_calls[0].name, response.tool_calls[0].args) == (
            "list_directory",
            {"path": folder},
        )
    for text in ("在 归档 文件夹里有哪些文件提到了发票？", 'What\'s in the reports folder that says "Q3"?'):
        runtime = ScriptedRuntime(['search_files"'], ['{"query": "发票"}'])  # a text to look for: the search
        response, _ = await run(runtime, request(messages=_asking(text), tools=tools), FavouringEmbedder("search"))
        assert response.tool_calls and response.tool_calls[0].name == "search_files"
    assert lt.asks_what_it_holds("What's inside the Desktop folder?") and lt.asks_what_it_holds("列一下 音乐 文件夹")


async def test_a_request_in_chinese_keeps_the_models_pick_over_a_nearer_tool() -> None:
    unsure = math.log(lt.NEARER_P) - 0.01
    runtime = ScriptedRuntime(['get_current_time"'], score=unsure)
    response, _ = await run(runtime, request(messages=_asking("现在几点了？"), tools=[CALC, TIME]), Halfway())
    assert response.tool_calls and response.tool_calls[0].name == "get_current_time"  # across languages, not swapped


def test_a_request_names_what_only_one_offered_tools_summary_names() -> None:
    tools = defs(NOTES_SEARCH, CALC, TIME)

    def named(text: str) -> dict[str, set[str]]:
        return {name: words for name, words in lt.named_by(tools, text).items() if words}

    assert named("Look in my notes for the gym schedule.") == {"notes_search": {"note"}}
    assert named("根据我的笔记，装修预算一共多少？") == {"notes_search": {"note"}}  # in Chinese too
    assert named("What time is it?") == {"get_current_time": {"time"}}  # the tool's name is in its summary
    assert named("现在的日期？") == {"get_current_time": {"date"}}
    assert named("Who wrote Pride and Prejudice?") == {}
    assert named("the passages") == {"notes_search": {"passage"}}
    both = defs(NOTES_SEARCH, {**NOTES_SEARCH, "name": "notes_search_2"})
    assert lt.named_by(both, "my notes") == {"notes_search": set(), "notes_search_2": set()}  # shared: names neither


async def test_a_tool_the_request_names_is_called_however_far_the_embedder_puts_it() -> None:
    gym = _asking("Look in my notes for the gym schedule.")
    unsure = math.log(lt.RELEVANT_P) - 0.1
    runtime = ScriptedRuntime(['notes_search"'], ['{"query": "gym schedule"}'], score=unsure)
    response, _ = await run(runtime, request(messages=gym, tools=[NOTES_SEARCH, CALC]))  # every cosine 0
    assert response.tool_calls and response.tool_calls[0].name == "notes_search"
    runtime = ScriptedRuntime(['notes_search"'], ['{"query": "gym schedule"}'], score=unsure)
    response, _ = await run(runtime, request(messages=gym, tools=[NOTES_SEARCH, CALC]), FavouringEmbedder("calculator"))
    assert response.tool_calls and response.tool_calls[0].name == "notes_search"  # not swapped for the nearer one
    runtime = ScriptedRuntime(['notes_search"'], ["Hello."], score=unsure)
    hello = _asking("Look in the gym schedule.")  # names nothing of the tool's: answered, as before
    response, _ = await run(runtime, request(messages=hello, tools=[NOTES_SEARCH, CALC]))
    assert response.tool_calls is None and response.content == "Hello."
    floor = math.log(lt.RELEVANT_FLOOR) - 1  # a name the model hardly wanted: never called
    runtime = ScriptedRuntime(['notes_search"'], ["Hello."], score=floor)
    response, _ = await run(runtime, request(messages=gym, tools=[NOTES_SEARCH, CALC]))
    assert response.tool_calls is None


async def test_an_answer_is_looked_at_again_and_a_near_tool_almost_as_likely_is_called() -> None:
    runtime = ScriptedRuntime(['answer"'], ['calculator"'], ['{"expression": "2 ** 16"}'])
    response, _ = await run(runtime, request(tools=[CALC, WRITE]), FavouringEmbedder("calculator"))
    assert response.tool_calls and response.tool_calls[0].name == "calculator"
    decision, probe, arguments = runtime.payloads
    assert probe["regex"] == lt.choice_regex(["calculator", "write_file"], answer=False)
    assert probe["messages"] == decision["messages"] and probe["prefix"] == lt.DECISION_PREFIX
    assert arguments["prefix"] == '{"tool": "calculator", "arguments": '
    runtime = ScriptedRuntime(['answer"'], ['calculator"'], ["Hello."])
    response, _ = await run(runtime, request(tools=[CALC, WRITE]))  # the tool is far from the request
    assert response.tool_calls is None and response.content == "Hello."


async def test_a_write_to_a_file_the_request_does_not_name_gives_the_answer() -> None:
    haiku = [{"role": "user", "content": "Write a haiku about autumn.", "timestamp": 1}]
    runtime = ScriptedRuntime(['write_file"'], ["Leaves fall."])
    response, _ = await run(runtime, request(messages=haiku, tools=[CALC, PERMITTED_WRITE]))
    assert response.tool_calls is None and response.content == "Leaves fall." and len(runtime.payloads) == 2
    named = [{"role": "user", "content": "Write a haiku about autumn to poem.txt", "timestamp": 1}]
    runtime = ScriptedRuntime(['write_file"'], ['{"path": "poem.txt", "content": "Leaves fall.", "size": 11}'])
    response, _ = await run(runtime, request(messages=named, tools=[CALC, PERMITTED_WRITE]))
    assert response.tool_calls and response.tool_calls[0].args["path"] == "poem.txt"
    assert runtime.payloads[1]["json_schema"]["properties"]["path"] == {"type": "string", "enum": ["poem.txt"]}


@pytest.mark.parametrize(
    ("ask", "question"),
    [
        ("Save this to a file: buy milk, call Ann.", "Which file should I save this to?"),
        ("把这段话保存下来：明天九点开会。", "要保存到哪个文件？"),
    ],
)
async def test_a_write_that_names_no_file_asks_which_file(ask: str, question: str) -> None:
    runtime = ScriptedRuntime(['write_file"'])
    messages = [{"role": "user", "content": ask, "timestamp": 1}]
    response, events = await run(runtime, request(messages=messages, tools=[CALC, PERMITTED_WRITE]))
    assert response.tool_calls is None and response.content.startswith(question)
    assert len(runtime.payloads) == 1  # no arguments generated, no answer made up
    assert [e.type.value for e in events] == ["text_delta", "usage", "done"]


async def test_an_unfinished_request_offers_the_file_tools_without_the_answer_or_the_bar() -> None:
    ask = {"role": "user", "content": "What is 37*43? Save it to out.txt", "timestamp": 1}
    runtime = ScriptedRuntime(['write_file"'], ["1591"], ['{"path": "out.txt", "size": 4}'], score=-5.0)
    response, _ = await run(runtime, request(messages=[ask, *HISTORY[1:]], tools=[CALC, PERMITTED_WRITE, TIME]))
    assert response.tool_calls and response.tool_calls[0].name == "write_file"
    assert runtime.payloads[0]["regex"] == lt.choice_regex(["write_file"], answer=False)


READ = {**tool("read_file", "path"), "description": "Read a text file."}


@pytest.mark.parametrize(
    ("ask", "paths"),
    [
        ("帮我看一下 项目纪要.md，谁负责预算？", ["项目纪要.md"]),  # the model wrote "meeting纪要.md"
        ("读一下「周报 第3周.md」", ["周报 第3周.md"]),  # and "workspaces/周报 第12周.md"
        ("Look at the Makefile: what does make lint run?", ["Makefile"]),  # and "Makefile/test.sh"
    ],
)
async def test_a_first_read_is_of_a_file_the_request_names_as_spelled(ask: str, paths: list[str]) -> None:
    runtime = ScriptedRuntime(['read_file"'], [json.dumps({"path": paths[0]}, ensure_ascii=False)])
    messages = [{"role": "user", "content": ask, "timestamp": 1}]
    response, _ = await run(runtime, request(messages=messages, tools=[READ, CALC]))
    assert response.tool_calls and response.tool_calls[0].args == {"path": paths[0]}
    assert runtime.payloads[1]["json_schema"]["properties"]["path"] == {"type": "string", "enum": paths}


async def test_a_first_read_that_names_no_file_is_left_to_the_model() -> None:
    runtime = ScriptedRuntime(['read_file"'], ['{"path": "notes"}'])
    messages = [{"role": "user", "content": "Read my notes file", "timestamp": 1}]
    await run(runtime, request(messages=messages, tools=[READ, CALC]), FavouringEmbedder("read file"))
    assert runtime.payloads[1]["json_schema"]["properties"]["path"] == {"type": "string"}
    listed = ("list_directory", {"path": "."}, True, {"entries": [{"path": "a.txt"}]})
    earlier = [*_turn("What is here?", listed), {"role": "assistant", "content": "a.txt", "timestamp": 4}]
    later = [*earlier, {"role": "user", "content": "Now read the notes file in docs", "timestamp": 5}]
    runtime = ScriptedRuntime(['read_file"'], ['{"path": "docs/notes"}'])
    await run(runtime, request(messages=later, tools=[READ, CALC]), FavouringEmbedder("read file"))
    assert runtime.payloads[1]["json_schema"]["properties"]["path"] == {"type": "string"}  # not a.txt, seen before


async def test_an_unfinished_request_reads_its_other_file_with_the_tool_that_read_the_first() -> None:
    ask = {"role": "user", "content": "Compare a.txt and b.txt", "timestamp": 1}
    read = {**CALL, "id": "r", "name": "read_file", "args": {"path": "a.txt"}}
    result = {**RESULT, "toolCallId": "r", "toolName": "read_file", "result": "alpha", "summary": "alpha"}
    messages = [ask, {"role": "assistant", "content": "", "toolCalls": [read], "timestamp": 2},
                {"role": "tool", "content": "", "toolResult": result, "timestamp": 3}]  # fmt: skip
    runtime = ScriptedRuntime(['read_file"'], ['{"path": "b.txt"}'])
    response, _ = await run(runtime, request(messages=messages, tools=[CALC, READ]))
    assert response.tool_calls and response.tool_calls[0].args == {"path": "b.txt"}
    assert runtime.payloads[0]["regex"] == lt.choice_regex(["read_file"], answer=False)
    assert runtime.payloads[1]["json_schema"]["properties"]["path"] == {"type": "string", "enum": ["b.txt"]}
    runtime = ScriptedRuntime(['calculator"'], ['{"expression": "1"}'], score=-5.0)  # no tool takes a file
    response, _ = await run(runtime, request(messages=messages, tools=[CALC]))
    assert runtime.payloads[0]["regex"] == lt.choice_regex(["calculator"]) and response.tool_calls is None


async def test_an_unsure_first_decision_still_calls_a_tool_near_the_request() -> None:
    runtime = ScriptedRuntime(['calculator"'], ['{"expression": "2 ** 16"}'], score=-3.0)
    response, _ = await run(runtime, request(tools=[CALC, WRITE]), FavouringEmbedder("calculator"))
    assert response.tool_calls and response.tool_calls[0].name == "calculator"
    runtime = ScriptedRuntime(['calculator"'], ["2 ** 16 is 65536."], score=-8.0)  # a name it did not want
    response, _ = await run(runtime, request(tools=[CALC, WRITE]), FavouringEmbedder("calculator"))
    assert response.tool_calls is None and response.content == "2 ** 16 is 65536."


async def test_when_every_offered_tool_has_succeeded_the_answer_is_written_without_a_decision() -> None:
    runtime = ScriptedRuntime(["It is 1591."])
    response, _ = await run(runtime, request(messages=HISTORY, tools=[CALC]))
    assert response.content == "It is 1591." and len(runtime.payloads) == 1 and "regex" not in runtime.payloads[0]


async def test_a_repeated_call_is_replaced_by_the_answer_from_the_results() -> None:
    runtime = ScriptedRuntime(['calculator"'], ['{"expression": "37*43"}'], ["It is 1591."])
    response, _ = await run(runtime, request(messages=FAILED, tools=[CALC]))
    assert response.tool_calls is None and response.content == "It is 1591."
    answer = runtime.payloads[2]
    assert "tools" not in answer and "returned: 37*43 = 1591" in answer["messages"][-1]["content"]


BUDGET = lt.SHORT_ARGUMENTS + len("What is 1 + 2?") // 2
"""The calculator here bounds no string and holds no text: its budget is that of a short call."""


@pytest.mark.parametrize(
    ("finish", "ask", "notice"),
    [
        ("length", "What is 1 + 2?", f"(I did not call calculator: its arguments ran past the {BUDGET}-"),
        ("loop", "What is 1 + 2?", "(I did not call calculator: its arguments fell into a repeating loop."),
        ("stop", "What is 1 + 2?", "(I did not call calculator: its arguments were incomplete."),
        ("loop", "一加二等于几？", "（没有调用 calculator：参数陷入了重复循环"),
    ],
)
async def test_arguments_cut_short_are_reported_to_the_user_then_answered(finish: str, ask: str, notice: str) -> None:
    cut = '{"expression": "1 + 2 / 60 / 60'
    runtime = ScriptedRuntime(['calculator"'], [cut], ["It is 3."], arguments_finish=finish)
    messages = [{"role": "user", "content": ask, "timestamp": 1}]
    response, events = await run(runtime, request(messages=messages, tools=[CALC]))
    assert response.tool_calls is None and response.content.endswith("\n\nIt is 3.")
    assert response.content.startswith(notice), response.content
    assert events[0].type.value == "text_delta"  # the notice comes first, then the streamed answer
    assert runtime.payloads[1]["stop_on_loop"] is True


DIVIDEND = {
    **tool("dividend_per_share"),
    "description": "Dividend per share from the total payout and the shares outstanding.",
    "parameters": {
        "type": "object",
        "required": ["payout", "shares"],
        "properties": {
            "payout": {"type": "number", "description": "USD"},
            "shares": {"type": "number", "description": "Count"},
        },
    },
}


@pytest.mark.parametrize(
    ("runaway", "finish"),
    [
        ('{"payout": 50000000, "shares": 10000000000000000000000000000000', "length"),  # json_schema: to the limit
        ('{"payout": 50000000, "shares": 10000000000000000}', "stop"),  # the compact grammar's bound ended it
    ],
)
async def test_a_number_cut_short_is_written_again_from_the_requests_own_numbers(runaway: str, finish: str) -> None:
    dividend = DIVIDEND
    ask = "The dividend per share with 100 million shares and a payout of 50 million USD?"
    again = '{"payout": 50000000, "shares": 100000000}'
    runtime = ScriptedRuntime(['dividend_per_share"'], [runaway], [again], arguments_finish=finish)
    messages = [{"role": "user", "content": ask, "timestamp": 1}]
    response, _ = await run(runtime, request(messages=messages, tools=[dividend]))
    assert response.tool_calls and response.tool_calls[0].args == {"payout": 50000000, "shares": 100000000}
    retried = runtime.payloads[2]["json_schema"]["properties"]
    assert retried["shares"] == {"type": "number", "enum": [100000000, 50000000]} == retried["payout"]
    assert "In digits: 100 million = 100000000; 50 million = 50000000." in runtime.payloads[1]["messages"][0]["content"]


@pytest.mark.parametrize(
    ("ask", "notice"),
    [
        ("Dividend per share for a payout of 5000 USD?", "(I did not call dividend_per_share: a number in its argu"),
        ("派息 5000 美元，每股股息是多少？", "（没有调用 dividend_per_share：参数里的一个数字写个不停"),
    ],
)
async def test_a_runaway_number_the_grammar_ended_is_not_called_and_the_user_is_told(ask: str, notice: str) -> None:
    runaway = '{"payout": 5000, "shares": 10000000000000000}'
    runtime = ScriptedRuntime(['dividend_per_share"'], [runaway], ["I need the number of shares."])
    messages = [{"role": "user", "content": ask, "timestamp": 1}]
    response, _ = await run(runtime, request(messages=messages, tools=[DIVIDEND]))
    assert response.tool_calls is None and response.content.startswith(notice), response.content
    assert len(runtime.payloads) == 3  # no scaled number stated: no second try


async def test_arguments_cut_short_elsewhere_are_not_written_again() -> None:
    runtime = ScriptedRuntime(['calculator"'], ['{"expression": "2 ** 16 + 1 + 1 + 1'], ["It is 65536."])
    response, _ = await run(runtime, request(tools=[CALC]))
    assert response.tool_calls is None and response.content.endswith("It is 65536.")
    assert len(runtime.payloads) == 3  # the decision, the arguments cut short, the answer: no second try


async def test_a_files_content_has_a_budget_far_beyond_a_short_argument_and_is_written_whole() -> None:
    content = "| a | b |\n|---|---|\n" + "| 0 | 0 |\n" * 400  # 4 kB of a table that repeats itself
    ask = [{"role": "user", "content": "Save a table of zeros to table.md", "timestamp": 1}]
    args = json.dumps({"path": "table.md", "content": content, "size": 1})
    runtime = ScriptedRuntime(['write_file"'], [args[i : i + 7] for i in range(0, len(args), 7)])
    response, _ = await run(runtime, request(messages=ask, tools=[CALC, PERMITTED_WRITE]))
    assert response.tool_calls and response.tool_calls[0].args["content"] == content
    assert runtime.payloads[1]["max_tokens"] == lt.ARGUMENT_TOKENS >= 4096


async def test_enough_calls_in_a_turn_skip_the_decision() -> None:
    calls = [
        {"role": "assistant", "content": "", "toolCalls": [{**CALL, "id": f"c{i}"}], "timestamp": 2}
        for i in range(lt.MAX_CALLS_PER_TURN)
    ]
    runtime = ScriptedRuntime(["Done."])
    response, _ = await run(runtime, request(messages=[HISTORY[0], *calls, HISTORY[2]], tools=[CALC, WRITE]))
    assert response.content == "Done." and len(runtime.payloads) == 1 and "regex" not in runtime.payloads[0]


# ---- what providers/models claims -----------------------------------------------------------------------------


def test_tool_calling_is_claimed_only_when_every_measured_rate_clears_the_bar() -> None:
    from sidecar.providers.local import TOOL_CALLING_BAR, claims_tool_calling

    good = {**dict.fromkeys(TOOL_CALLING_BAR, 0.9), "invalid_tool_call_rate": 0.0}
    assert claims_tool_calling(good)
    for key, bar in TOOL_CALLING_BAR.items():
        assert not claims_tool_calling({**good, key: bar - 0.01}), key
        assert claims_tool_calling({**good, key: bar}), key
    assert not claims_tool_calling({**good, "invalid_tool_call_rate": 0.05})
    assert not claims_tool_calling({})


async def test_models_report_the_measured_tool_use(monkeypatch: pytest.MonkeyPatch) -> None:
    from sidecar.localmodel import assets
    from sidecar.providers import local as local_module

    monkeypatch.setattr(assets, "status", lambda: (True, None))
    monkeypatch.setattr(assets, "arguments_status", lambda: (True, None))  # the set-up TOOL_USE_MEASURED is of
    monkeypatch.setattr(assets, "physical_memory", lambda: 16 * GIB)
    (spec,) = await local(ScriptedRuntime()).model_specs()
    measured = local_module.TOOL_USE_MEASURED
    assert spec.metadata["tool_use"] == measured
    assert ("tool_calling" in spec.capabilities) is local_module.claims_tool_calling(measured)
    better = {**measured, **dict.fromkeys(local_module.TOOL_CALLING_BAR, 1.0), "invalid_tool_call_rate": 0.0}
    monkeypatch.setattr(local_module, "TOOL_USE_MEASURED", better)
    (spec,) = await local(ScriptedRuntime()).model_specs()
    assert "tool_calling" in spec.capabilities and spec.metadata["tool_use"]["single_function_rate"] == 1.0
    monkeypatch.setattr(local_module, "TOOL_USE_MEASURED", {**better, "irrelevance_no_call_rate": 0.5})
    (spec,) = await local(ScriptedRuntime()).model_specs()
    assert "tool_calling" not in spec.capabilities


def test_a_required_name_the_conversation_never_gave_is_made_up() -> None:
    kinds = {"type": "string", "enum": ["A", "B"]}
    properties = {"who": {"type": "string"}, "where": {"type": "string"}, "kind": kinds}
    params = {"type": "object", "required": ["who", "where", "kind"], "properties": properties}

    def asked(text: str) -> Any:
        return request(messages=[{"role": "user", "content": text, "timestamp": 1}]).messages

    assert lt.made_up({"who": "john_doe", "where": "Austin"}, params, asked("Pay for my trip to Austin")) == ["who"]
    assert lt.made_up({"where": "San Francisco, CA"}, params, asked("What time is it?")) == ["where"]
    assert lt.made_up({"who": "EUR", "where": "Lisbon, Portugal"}, params, asked("Price in euros in Lisbon")) == []
    run_together = asked("Order 5 fries from uber eats mc donalds")  # the name's words said run apart
    assert lt.made_up({"who": "McDonald's", "where": "fries"}, params, run_together) == []
    assert lt.made_up({"who": "Burger King", "where": "fries"}, params, run_together) == ["who"]
    assert lt.made_up({"who": "MySister", "where": "Austin"}, params, asked("Call my sister in Austin")) == ["who"]
    assert lt.made_up({"where": "Asia/Shanghai"}, params, asked("北京现在几点？")) == []  # asked in Chinese
    assert lt.made_up({"kind": "B"}, params, asked("Do it")) == []  # an enum's choice
    composed = {"who": "Leaves fall.", "where": "quiet pond at dusk"}  # a sentence, lower-case words
    assert lt.made_up(composed, params, asked("Write a haiku")) == []
    assert lt.made_up({"where": "2026-12-04T15:00:00Z"}, params, asked("Book it for tomorrow at 3pm")) == []
    result = {**RESULT, "result": "Meeting room: Blue Hall", "summary": "Meeting room: Blue Hall"}
    after = [*HISTORY[:2], {**HISTORY[2], "toolResult": result}]
    assert lt.made_up({"where": "Blue Hall"}, params, request(messages=after).messages) == []  # a tool's result


def test_prose_written_where_a_formula_of_numbers_is_asked_for_is_made_up() -> None:
    calc = {"expression": {"type": "string", "description": "e.g. '(3 + 4) * 2 ** 10 / sqrt(2)'"}}
    params = {"type": "object", "required": ["expression"], "properties": calc}

    def asked(text: str) -> Any:
        return request(messages=[{"role": "user", "content": text, "timestamp": 1}]).messages

    capital = asked("What's the capital of Australia?")
    assert lt.made_up({"expression": "Australia's capital is Canberra."}, params, capital) == ["expression"]
    assert lt.made_up({"expression": "澳大利亚的首都是堪培拉"}, params, asked("澳大利亚的首都是哪里？")) == [
        "expression"
    ]
    assert lt.made_up({"expression": "sqrt(pi)"}, params, asked("What is the square root of pi?")) == []
    journal = asked("Add a line to journal.md: today's date, then 'ran 5k in 27 minutes'")
    assert lt.made_up({"expression": "date()"}, params, journal) == ["expression"]  # a formula of no number
    assert lt.made_up({"expression": "2 * pi * 3"}, params, asked("Circumference of a circle of radius 3?")) == []
    maths = {"formula": {"type": "string", "description": "The mathematical formula to evaluate"}}
    formula = {"type": "object", "required": ["formula"], "properties": maths}
    assert lt.made_up({"formula": "the capital"}, formula, capital) == ["formula"]
    search = {"expression": {"type": "string", "description": "The search expression, e.g. 'refund'"}}
    searching = {"type": "object", "required": ["expression"], "properties": search}
    assert lt.made_up({"expression": "refund"}, searching, asked("Which files mention refunds?")) == []


def test_a_placeholder_nobody_wrote_is_made_up() -> None:
    keys = {"token": {"type": "string"}, "query": {"type": "string"}, "image": {"type": "string"}}
    params = {"type": "object", "required": ["token", "query"], "properties": keys}

    def asked(text: str) -> Any:
        return request(messages=[{"role": "user", "content": text, "timestamp": 1}]).messages

    hi = asked("search my messages for 'hi shaked'")
    assert lt.made_up({"token": "your_token_here", "query": "hi shaked"}, params, hi) == ["token"]
    given = asked("search my messages for 'hi shaked', my token is xoxb-1")
    assert lt.made_up({"token": "xoxb-1", "query": "<slack token>"}, params, given) == []  # a space: not a tag
    assert lt.made_up({"token": "<slack token>", "query": "hi shaked"}, params, hi) == ["token"]  # a token untold
    assert lt.made_up({"token": "<api_token>", "query": "hi"}, params, hi) == ["token"]
    assert lt.made_up({"token": {"key": "YOUR_API_KEY"}, "query": "x"}, params, hi) == ["token"]
    said = asked("My key is called YOUR_API_KEY, search for 'hi'")
    assert lt.made_up({"token": "YOUR_API_KEY", "query": "hi"}, params, said) == []
    jigsaw = {**params, "required": ["image"]}
    assert lt.made_up({"image": "path_to_puzzle_image.jpg"}, jigsaw, asked("Create a jigsaw puzzle")) == ["image"]
    assert lt.made_up({"image": "cat.png"}, jigsaw, asked("Make a jigsaw of cat.png")) == []
    acl, ids = asked("Adds an ACL mapping"), {"type": "object", "required": ["id"], "properties": {"id": {}}}
    for example in ("user123", "file1.txt", "12345", "product_2", "Order-17"):
        assert lt.made_up({"id": example}, ids, acl) == ["id"], example
    for given_id in ("user123", "12345", "order-17"):  # written by the user: theirs
        assert lt.made_up({"id": given_id}, ids, asked(f"Look up {given_id}")) == [], given_id
    for real in ("user1234", "file12345.txt", "bar", "users1"):  # no numbered example, no run of digits
        assert lt.made_up({"id": real}, ids, acl) == [], real
    for spelled, text in (("order-17", "where is my order #17"), ("12345", "track order 12,345")):
        assert lt.made_up({"id": spelled}, ids, asked(text)) == [], spelled  # the user's, in another spelling
    route = {"type": "object", "required": ["origin", "destination"], "properties": {"origin": {}, "destination": {}}}
    thanks = asked("谢谢你刚才的路线推荐，太有用了！我们已经到了")  # "your start address" where none was given
    assert lt.made_up({"origin": "你的起点地址", "destination": "你的终点地址"}, route, thanks) == [
        "destination",
        "origin",
    ]
    home = asked("从你的公司到我家怎么走？")  # written by the user: theirs
    assert lt.made_up({"origin": "你的公司", "destination": "我家"}, route, home) == []
    content = {"type": "object", "required": ["content"], "properties": {"content": {}}}
    for composed in ("id,name\n1,user1\n2,user2", "Thanks for your help today, see you at the review!"):
        assert lt.made_up({"content": composed}, content, asked("Write 3 sample users")) == [], "text composed"


def test_a_shape_without_values_or_a_number_for_an_id_nobody_wrote_is_made_up() -> None:
    def asked(text: str) -> Any:
        return request(messages=[{"role": "user", "content": text, "timestamp": 1}]).messages

    headway = {"type": "object", "required": ["ego"], "properties": {"ego": {"type": "object"}}}
    image = asked("Compute the headway of this image")
    assert lt.made_up({"ego": {"position": {}, "lane": ""}}, headway, image) == ["ego"], "a shape with no values"
    assert lt.made_up({"ego": {"position": {"x": 0}, "lane": ""}}, headway, image) == [], "a value in it"
    assert lt.made_up({"ego": {}}, headway, image) == [], "a bare {}: no options"
    for cleared, text in (({"assignee": None}, "unassign PROJ-12"), ({"description": ""}, "clear the description"),
                          ({"match_all": {}}, "show me all documents in the logs index")):  # fmt: skip
        assert lt.made_up({"ego": cleared}, headway, asked(text)) == [], text  # null, or a key the user spoke of
    profile = {"type": "object", "required": ["user_id", "email"], "properties": {
        "user_id": {"type": "integer"}, "email": {"type": "string"},
        "province_id": {"type": "integer", "description": "The province: 1 for Bangkok, 2 for Chiang Mai."},
    }}  # fmt: skip
    email = asked("Can you update my email to john.doe@example.com?")
    assert lt.made_up({"user_id": 123, "email": "john.doe@example.com"}, profile, email) == ["user_id"]
    assert lt.made_up({"user_id": "123", "email": "john.doe@example.com"}, profile, email) == ["user_id"], "digits"
    mine = asked("My user id is 4417: update my email to john.doe@example.com")
    assert lt.made_up({"user_id": 4417, "email": "john.doe@example.com"}, profile, mine) == [], "given"
    bangkok = {**profile, "required": ["province_id", "email"]}
    assert lt.made_up({"province_id": 1, "email": "john.doe@example.com"}, bangkok, email) == [], "its description's"
    tasks = {"type": "object", "required": ["task_ids"], "properties": {"task_ids": {"type": "array"}}}
    for given, text in ((["1098765432109876543"], "post to channel 1098765432109876543"),
                        ([-1001234567890], "chat -1001234567890"), (["007"], "ask agent 007"),
                        ([1, 2, 3, 4, 5], "delete tasks 1-5"), ([1234567], "record 1,234,567"),
                        ([42], "task forty-two"), ([0], "the top-level folder"), (["²"], "x")):  # fmt: skip
        assert lt.made_up({"task_ids": given}, tasks, asked(text)) == [], text
    assert lt.made_up({"task_ids": [7]}, tasks, asked("delete tasks 1-5")) == ["task_ids"], "outside the range"
    merge = {"type": "object", "required": ["repo", "pullNumber", "page_number"], "properties": {
        "repo": {"type": "string"}, "pullNumber": {"type": "integer"}, "page_number": {"type": "integer"},
    }}  # fmt: skip
    prs = asked("prs open on acme/api?")  # a blind set: merge_pull_request(pullNumber: 123)
    assert lt.made_up({"repo": "acme/api", "pullNumber": 123, "page_number": 1}, merge, prs) == ["pullNumber"]
    assert lt.made_up({"repo": "acme/api", "pullNumber": 42}, merge, asked("merge PR #42 of acme/api")) == []
    guests = {"type": "object", "required": ["guest_number", "phone_number"], "properties": {
        "guest_number": {"type": "integer"}, "phone_number": {"type": "string"}}}  # fmt: skip
    couple = asked("Book a table for me and my wife, call (555) 123-4567")  # a count, a number with separators
    assert lt.made_up({"guest_number": 2, "phone_number": "5551234567"}, guests, couple) == []


def test_a_required_number_where_the_conversation_gives_none_is_made_up() -> None:
    properties = {"count": {"type": "number"}, "rate": {"type": "number"}, "level": {"type": "number", "enum": ["1"]}}
    params = {"type": "object", "required": ["count", "rate"], "properties": properties}

    def asked(text: str) -> Any:
        return request(messages=[{"role": "user", "content": text, "timestamp": 1}]).messages

    grow = asked("How can the deer population in a forest grow?")
    assert lt.made_up({"count": 1000, "rate": 0.05}, params, grow) == ["count", "rate"]
    assert lt.made_up({"count": 1000, "rate": 0.05}, params, asked("1000 deer, how fast do they grow?")) == []
    assert lt.made_up({"count": 12, "rate": 0.5}, params, asked("A dozen eggs, half of them broken")) == []
    assert lt.made_up({"count": 6.2832, "rate": 1}, params, asked("Plot a sine wave from zero to two pi")) == []
    assert lt.made_up({"count": True, "rate": 1}, params, grow) == [], "a boolean is no number"
    with_enum = {**params, "required": ["count", "level"]}
    assert lt.made_up({"count": 5, "level": 1}, with_enum, grow) == [], "an enum's choice is no made-up number"
    trip = {**params, "required": ["origin", "destination"]}
    coordinates = {"origin": {"lat": 42.36, "lon": -71.06}, "destination": {"lat": 40.71, "lon": -74.0}}
    assert lt.made_up(coordinates, trip, asked("how far apart are those towns?")) == ["destination", "origin"]
    assert lt.made_up(coordinates, trip, asked("How long from Boston to New York by car?")) == [], "named places"
    weather = {"lat": 52.52, "lon": 13.41}
    place = {**params, "required": ["lat", "lon"]}
    assert lt.made_up(weather, place, asked("What's the weather in Berlin?")) == []
    body = {**params, "required": ["weight", "height"]}  # a named place's numbers are its coordinates, not a BMI's
    bmi = asked("What's the average temperature for Los Angeles in December?")
    assert lt.made_up({"weight": 70, "height": 1.7}, body, bmi) == ["height", "weight"]
    assert lt.made_up({"count": 6}, {**params, "required": ["count"]}, grow) == [], "one number: roll a die"
    earlier = [
        {"role": "user", "content": "what is it like outside?", "timestamp": 1},
        {"role": "assistant", "content": "It is 21 degrees.", "timestamp": 2},
        {"role": "user", "content": "convert that to fahrenheit", "timestamp": 3},
    ]
    assert lt.made_up({"count": 21, "rate": 1}, params, request(messages=earlier).messages) == [], "an earlier turn"
    named = {**params, "required": ["count", "where"], "properties": {**properties, "where": {"type": "string"}}}
    assert lt.made_up({"count": 3, "where": "notes.md"}, named, grow) == [], "judged by its other arguments"
    result = {**RESULT, "result": "There are 320 deer", "summary": "There are 320 deer"}
    after = [{**HISTORY[0], "content": "How many deer are there?"}, HISTORY[1], {**HISTORY[2], "toolResult": result}]
    assert lt.made_up({"count": 320, "rate": 1}, params, request(messages=after).messages) == []  # a tool's result
    nothing = {**RESULT, "result": "Deer live in forests", "summary": "Deer live in forests"}
    after[2] = {**HISTORY[2], "toolResult": nothing}
    assert lt.made_up({"count": 320, "rate": 1}, params, request(messages=after).messages) == ["count", "rate"]


def test_a_code_for_an_argument_that_asks_for_one_is_not_made_up() -> None:
    properties = {
        "to_currency": {"type": "string", "description": "The currency to convert to."},
        "airline": {"type": "string", "description": "The airline."},
    }
    params = {"type": "object", "required": ["to_currency", "airline"], "properties": properties}
    convert = request(messages=[{"role": "user", "content": "Convert 150 Euros to Canadian dollars.", "timestamp": 1}])
    assert lt.made_up({"to_currency": "CAD", "airline": "Euro Wings"}, params, convert.messages) == []
    assert lt.made_up({"to_currency": "CAD", "airline": "KLM"}, params, convert.messages) == ["airline"]  # no code
    airports = {"type": "object", "required": ["origin_airport", "destination_airport"], "properties": {
        "origin_airport": {"type": "string", "description": "The airport code."},
        "destination_airport": {"type": "string", "description": "The airport code."}}}  # fmt: skip
    flight = {"origin_airport": "JFK", "destination_airport": "LAX"}

    def asked(text: str) -> Any:
        return request(messages=[{"role": "user", "content": text, "timestamp": 1}]).messages

    assert lt.made_up(flight, airports, asked("I need a round trip flight")) == sorted(flight), "nothing named"
    for named in ("A round trip from New York to Los Angeles", "round trip from jfk to la", "往返机票，纽约到洛杉矶",
                  "cheapest flight from shanghai to beijing", "i need a round trip for the conference"):  # fmt: skip
        assert lt.made_up(flight, airports, asked(named)) == [], named
    money = {"type": "object", "required": ["to_currency"], "properties": {"to_currency": properties["to_currency"]}}
    assert lt.made_up({"to_currency": "USD"}, money, asked("how much is that in dollars?")) == [], "a currency's name"


def test_a_language_the_user_named_is_written_as_named_unless_a_code_is_asked_for() -> None:
    params = {"type": "object", "properties": {
        "source_language": {"type": "string", "description": "The language the text is currently in."},
        "target_language": {"type": "string", "description": "The language the text will be translated to."},
        "tgt_lang": {"type": "string", "description": "The code of the target language, such as 'en' for English."},
        "lang": {"type": "string", "description": "ISO 639-1 language."},
        "voice": {"type": "string", "description": "The voice to read in."},
        "level": {"type": "string", "description": "The language level.", "enum": ["en", "fr"]}}}  # fmt: skip
    args = {"source_language": "en", "target_language": "fr", "tgt_lang": "fr", "lang": "fr", "voice": "fr",
            "level": "fr"}  # fmt: skip

    def asked(text: str) -> Any:
        return request(messages=[{"role": "user", "content": text, "timestamp": 1}]).messages

    said = asked("Translate Hello, how are you? from English to french.")
    assert lt.language_names(args, params, said) == {**args, "source_language": "English", "target_language": "french"}
    assert lt.language_names(args, params, asked("Translate 'bonjour' please")) == args, "no language named"
    assert lt.language_names({"source_language": "xx"}, params, said) == {"source_language": "xx"}, "no known code"
    for coded in ("The target language, e.g. DE, EN-US", "Two-letter language (fr, de, es)", "Language, like ja"):
        spec = {"properties": {"target_language": {"type": "string", "description": coded}}}
        assert lt.language_names({"target_language": "fr"}, spec, said) == {"target_language": "fr"}, coded
    for key, spec in (("language_code", {}), ("slang_term", {}), ("lang", {"pattern": "^[a-z]{2}$"}),
                      ("lang", {"default": "en"})):  # fmt: skip
        assert lt.language_names({key: "fr"}, {"properties": {key: spec}}, said) == {key: "fr"}, key
    cuisine = asked("Find French restaurants nearby")
    assert lt.language_names({"target_language": "fr"}, params, cuisine) == {"target_language": "fr"}, "a cuisine"


def test_a_time_of_day_or_a_list_of_points_nobody_gave_is_made_up() -> None:
    """ "奥斯陆明天几点日出？" offered a time plugin's convert_time got ``time: "06:00"`` (the time it asks after);
    "Which country has the most lakes?" offered maps_elevation got two cities' coordinates in one list."""

    def asked(text: str) -> Any:
        return request(messages=[{"role": "user", "content": text, "timestamp": 1}]).messages

    convert = {"type": "object", "required": ["source_timezone", "time"], "properties": {"time": {"type": "string"}}}
    sunrise = asked("奥斯陆明天几点日出？")
    assert lt.made_up({"source_timezone": "Europe/Oslo", "time": "06:00"}, convert, sunrise) == ["time"]
    meeting = asked("When it's 9:30 in Oslo, what time is it in Tokyo?")
    assert lt.made_up({"source_timezone": "Europe/Oslo", "time": "09:30"}, convert, meeting) == []
    evening = asked("Convert nine in the evening Oslo time to Tokyo time")  # a number in words: worked out
    assert lt.made_up({"source_timezone": "Europe/Oslo", "time": "21:00"}, convert, evening) == []
    points = {"type": "object", "required": ["locations"], "properties": {"locations": {"type": "array"}}}
    lakes = asked("Which country has the most lakes?")
    two = [{"latitude": 40.71, "longitude": -74.0}, {"latitude": 34.05, "longitude": -118.24}]
    assert lt.made_up({"locations": two}, points, lakes) == ["locations"]
    assert lt.made_up({"locations": two}, points, asked("How high are New York and Los Angeles?")) == []
    sides = {"type": "object", "required": ["sides"], "properties": {"sides": {"type": "integer"}}}
    assert lt.made_up({"sides": 6}, sides, asked("Roll a die for me")) == []  # one number: a default, not judged


def test_a_round_figure_or_a_date_nobody_gave_is_made_up() -> None:
    """Where no offered function fitted, the model filled a required number with a round figure nobody said
    ("…my 2000 sq ft home?" → ``average_sunlight_hours: 10``) and a date where nothing says when ("Get me tickets to
    see Toto." → ``date: "2023-04-15"``); a count it knows, a unit's step of a given number, a default, a date the
    request speaks of are the user's."""

    def asked(text: str) -> Any:
        return request(messages=[{"role": "user", "content": text, "timestamp": 1}]).messages

    number, date = {"type": "number"}, {"type": "string"}
    solar = {"type": "object", "required": ["square_footage", "hours"], "properties": {"square_footage": number,
             "hours": number}}  # fmt: skip
    home = asked("How much electricity will I need for my 2000 sq ft home?")
    assert lt.made_up({"square_footage": 2000, "hours": 10}, solar, home) == ["hours"]
    assert lt.made_up({"square_footage": 2000, "hours": 10}, solar, asked("2000 sq ft, ten hours of sun")) == []
    assert lt.made_up({"square_footage": 2000, "hours": 10}, solar, asked("2000 sq ft and 10 hours of sun")) == []
    assert lt.made_up({"square_footage": 2000, "hours": 13}, solar, home) == [], "not a round figure: a known count"
    assert lt.made_up({"square_footage": 2000, "hours": 120}, solar, asked("2000 sq ft, sunny for 2 hours")) == []
    assert lt.made_up({"square_footage": 2000, "hours": 20}, solar, asked("2000 sq ft, 1200 minutes of sun")) == []
    assert lt.made_up({"square_footage": 2000, "hours": 30}, solar, asked("2000 sq ft, half an hour of sun")) == []
    assert lt.made_up({"square_footage": 2000, "hours": 1000}, solar, asked("2000 sq ft, a thousand hours")) == []
    assert lt.made_up({"square_footage": 2000, "hours": 10}, solar, asked("我家两千平方英尺，要多少电？")) == [], "zh"
    pay = {"type": "object", "required": ["recipient", "amount"], "properties": {"recipient": {"type": "string"},
           "amount": number}}  # fmt: skip
    assert lt.made_up({"recipient": "张三", "amount": 500}, pay, asked("给张三转账五百元")) == []
    assert lt.made_up({"recipient": "Diego", "amount": 100}, pay, asked("I would like to pay Diego.")) == ["amount"]
    news = {
        "type": "object",
        "required": ["query", "max_results"],
        "properties": {"query": date, "max_results": number},
    }
    assert lt.made_up({"query": "climate", "max_results": 10}, news, asked("Search the news for climate")) == []
    huge = {"square_footage": 2000, "hours": 10**400}
    assert lt.made_up(huge, solar, home) == [], "a runaway number is no round figure (and no OverflowError)"
    assert lt.made_up({"square_footage": 2000, "hours": 60}, solar, asked("2000 sq ft, an hour of sun")) == []
    defaulted = {**solar, "properties": {**solar["properties"], "hours": {"type": "number", "default": 10}}}
    assert lt.made_up({"square_footage": 2000, "hours": 10}, defaulted, home) == [], "its declared default"
    usual = {**solar, "properties": {**solar["properties"], "hours": {"type": "number", "description": "Usually 10."}}}
    assert lt.made_up({"square_footage": 2000, "hours": 10}, usual, home) == [], "a number its description states"
    size = {"type": "integer", "description": "The size of the deck. Default is 52."}
    hand = {"type": "integer", "description": "The size of the hand. Default is 5."}
    poker = {"type": "object", "required": ["deck_size", "hand_size"], "properties": {"deck_size": size,
             "hand_size": hand}}  # fmt: skip
    full_house = asked("What is the probability of getting a full house in poker?")
    assert lt.made_up({"deck_size": 52, "hand_size": 5}, poker, full_house) == [], "the numbers its arguments state"
    assert lt.made_up({"deck_size": 52, "hand_size": 7}, poker, full_house) == [], "one left: one number, not judged"
    assert lt.made_up({"deck_size": 50, "hand_size": 7}, poker, full_house) == ["deck_size", "hand_size"]
    limits = {"type": "object", "required": ["limit"], "properties": {"limit": {"type": "integer", "enum": [10, 20]}}}
    assert lt.made_up({"limit": 10}, limits, home) == [], "an enum's choice"
    tickets = {"type": "object", "required": ["event", "date"], "properties": {"event": date, "date": date}}
    toto = {"event": "Toto", "date": "2023-04-15"}
    assert lt.made_up(toto, tickets, asked("Get me tickets to see Toto.")) == ["date"]
    for when in ("Get me tickets to see Toto tomorrow.", "Toto tickets for the 15th", "Toto, next Friday please",
                 "买两张托托演唱会的票，周六的", "Toto tickets for Christmas",
                 "Toto on my calendar?", "托托，国庆节"):  # fmt: skip
        assert lt.made_up(toto, tickets, asked(when)) == [], when
    for no_when in ("Get me tickets to see Toto with my friend.", "Toto tickets for a wedding gift"):
        assert lt.made_up(toto, tickets, asked(no_when)) == ["date"], no_when  # "fri…", "wed…": no day's name
    film = {"type": "object", "required": ["movie_name"], "properties": {"movie_name": date}}
    matrix = asked("I'd like 3 tickets on the 9th of march, around 19:00. Find a theater in Los Angeles for me?")
    assert lt.made_up({"movie_name": "The Matrix"}, film, matrix) == ["movie_name"], "'the' names nothing"
    assert lt.made_up({"movie_name": "The Matrix"}, film, asked("Two tickets for The Matrix")) == []
    shop = {"type": "object", "required": ["item", "location"], "properties": {"item": date, "location": date}}
    for chinese in ("紐約今天天氣如何？", "去魔都玩，买衣服"):  # its places come in another script, or by a nickname
        assert lt.made_up({"item": "衣服", "location": "上海"}, shop, asked(chinese)) == [], chinese
    for written in ("15-04-2023", "04/15/2023", "15.04.2023", "2023/04/15", "2023.04.15", "2023年4月15日"):
        assert lt.made_up({**toto, "date": written}, tickets, asked("Get me tickets to see Toto.")) == ["date"]
        assert lt.made_up({**toto, "date": written}, tickets, asked("Toto tickets for the 15th")) == [], written
    for count in ("I need 2 tickets to see Toto.", "Toto for 3 people, please", "Toto: 15 tickets", "Toto twice"):
        assert lt.made_up(toto, tickets, asked(count)) == (["date"] if "15" not in count else []), count
    for own in ("Toto tickets on 15/4", "Toto in 2023", "Toto, 4.15", "Toto tickets on the first", "Toto at night",
                "Toto in 3 hours", "Toto at 2pm", "Toto tmrw", "Toto by end of Q3", "托托，三天后",
                "托托，晚上八点"):  # fmt: skip
        assert lt.made_up(toto, tickets, asked(own)) == [], own  # the date's own numbers, an ordinal, when in hours


FORECAST = {
    **tool("weather_forecast", "latitude"),
    "description": "The weather forecast at a place's coordinates.",
    "parameters": {
        "type": "object",
        "properties": {
            "latitude": {"type": "number", "description": "Latitude."},
            "longitude": {"type": "number", "description": "Longitude."},
            "temperature_unit": {
                "type": "string",
                "description": "The unit of temperatures (default celsius)",
                "enum": ["celsius", "fahrenheit"],
            },
            "wind_unit": {"type": "string", "description": "Wind speed unit", "enum": ["kmh", "mph", "knots"]},
        },
        "required": ["latitude", "longitude"],
    },
}


def test_an_optional_choice_the_request_spells_is_given() -> None:
    params = MetonaToolDef.model_validate(FORECAST).parameters.model_dump(mode="json", exclude_none=True)

    def asked(text: str) -> Any:
        return request(messages=_asking(text)).messages

    where = {"latitude": 48.85, "longitude": 2.35}
    fahrenheit = asked("Use coordinates 48.85, 2.35 and give me the forecast in fahrenheit for the next 5 days.")
    assert lt.said_choices(where, params, fahrenheit) == {**where, "temperature_unit": "fahrenheit"}
    assert lt.said_choices(where, params, asked("The forecast at 48.85, 2.35, in Fahrenheit, wind in knots")) == {
        **where, "temperature_unit": "fahrenheit", "wind_unit": "knots"}  # fmt: skip
    assert lt.said_choices(where, params, asked("48.85, 2.35 in celsius")) == where, "the default: no change"
    assert lt.said_choices(where, params, asked("48.85, 2.35: celsius or fahrenheit?")) == where, "two said"
    assert lt.said_choices(where, params, asked("The forecast at 48.85, 2.35 in mph")) == where, "under 4 letters"
    given = {**where, "temperature_unit": "celsius"}
    assert lt.said_choices(given, params, fahrenheit) == given, "the model's own choice stays"
    for not_asked in ("48.85, 2.35, not in fahrenheit please", "48.85, 2.35 without fahrenheit", "48.85, 2.35: "
                      "the fahrenheit scale, explain it"):  # fmt: skip
        assert lt.said_choices(where, params, asked(not_asked)) == where, not_asked
    assert lt.said_choices(where, params, asked("48.85, 2.35的天气，用fahrenheit")) == {
        **where, "temperature_unit": "fahrenheit"}  # fmt: skip
    kind = asked("I'd like a fahrenheit forecast for 48.85, 2.35.")  # the kind of thing asked for, after "a"
    assert lt.said_choices(where, params, kind) == {**where, "temperature_unit": "fahrenheit"}
    assert lt.said_choices(where, params, asked("48.85, 2.35: a fahrenheit of 50 or more?")) == where, "spoken of"
    top = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "time": {
        "type": "string", "enum": ["", "hour", "day", "week", "month", "year", "all"], "default": ""}}}  # fmt: skip
    best = {"name": "AskHistorians"}
    this_week = asked("whats the best of r/AskHistorians this week? like 10 posts")  # a period after "this"
    assert lt.said_choices(best, top, this_week) == {**best, "time": "week"}
    assert lt.said_choices(where, params, asked("48.85, 2.35: is this fahrenheit?")) == where, "no period: spoken of"
    remind = {"type": "object", "required": ["title"], "properties": {"title": {"type": "string"}, "recurrence": {
        "type": "string", "enum": ["none", "day", "week", "month"], "default": "none"}}}  # fmt: skip
    mom = {"title": "call mom"}  # how often, not a window to look back over: "this week" is once
    assert lt.said_choices(mom, remind, asked("Remind me to call mom this week")) == mom


def test_numbers_the_request_gives_are_written_in_the_order_it_gives_them() -> None:
    rectangle = {
        "type": "object",
        "properties": {
            "unit": {"type": "string"},
            "width": {"type": "number"},
            "label": {"type": "string"},
            "length": {"type": "number"},
            "depth": {"type": "integer"},
        },
        "required": ["width", "length"],
    }
    order = list(lt.in_the_order_said(rectangle, "A length of 50 meters and a width of 30, depth: 2")["properties"])
    assert order == ["unit", "length", "label", "width", "depth"]  # the strings keep their places
    assert lt.in_the_order_said(rectangle, "A width of 30 and a length of 50") is rectangle  # already in order
    assert lt.in_the_order_said(rectangle, "the length and the width: 50 and 30") is rectangle  # not each its number
    assert lt.in_the_order_said({"type": "object"}, "a length of 5") == {"type": "object"}


async def test_the_arguments_are_asked_for_in_the_order_the_request_gives_them() -> None:
    area = {
        **tool("rectangle_area", "width"),
        "description": "The area of a rectangle.",
        "parameters": {
            "type": "object",
            "properties": {
                "width": {"type": "number", "description": "in m"},
                "length": {"type": "number", "description": "in m"},
            },
            "required": ["width", "length"],
        },
    }
    runtime = ScriptedRuntime(['rectangle_area"'], ['{"length": 50, "width": 30}'], score=-0.05)
    asked = request(
        messages=_asking("The area of a rectangle with a length of 50 m and a width of 30 m?"), tools=[area]
    )
    response, _ = await run(runtime, asked, FavouringEmbedder("rectangle"))
    assert response.tool_calls and response.tool_calls[0].args == {"length": 50, "width": 30}
    assert list(runtime.payloads[1]["json_schema"]["properties"]) == ["length", "width"]


async def test_the_choice_a_request_spells_reaches_the_call() -> None:
    runtime = ScriptedRuntime(['weather_forecast"'], ['{"latitude": 48.85, "longitude": 2.35}'], score=-0.05)
    asked = request(messages=_asking("The forecast at 48.85, 2.35 in fahrenheit, please"), tools=[FORECAST, CALC])
    response, _ = await run(runtime, asked, FavouringEmbedder("weather"))
    assert [(c.name, dict(c.args)) for c in response.tool_calls or ()] == [
        ("weather_forecast", {"latitude": 48.85, "longitude": 2.35, "temperature_unit": "fahrenheit"})
    ]


def test_a_how_to_question_is_explained_not_done() -> None:
    assert lt.asks_how_to("How do I create an index in SQLite?")
    assert lt.asks_how_to("how to delete a git branch")
    assert lt.asks_how_to("怎么删除分支？") and lt.asks_how_to("请问如何新建一张表？")
    assert not lt.asks_how_to("Create an index on users.email. How do I check it worked?")  # asks it done first
    assert not lt.asks_how_to("怎么样，今天的会开完了吗？")
    assert not lt.asks_how_to("How many rows are in the orders table?")


async def test_a_how_to_question_never_runs_a_tool_that_changes_things() -> None:
    create = {**tool("create_table", "query"), "description": "Create a new table in the SQLite database."}
    runtime = ScriptedRuntime(['create_table"'], ["Use CREATE INDEX …"], score=-0.05)
    asked = request(messages=_asking("How do I create an index in SQLite?"), tools=[create, CALC])
    response, _ = await run(runtime, asked, FavouringEmbedder("create"))
    assert response.tool_calls is None and response.content == "Use CREATE INDEX …"
    runtime = ScriptedRuntime(['create_table"'], ['{"query": "CREATE TABLE t (id INTEGER)"}'], score=-0.05)
    asked = request(messages=_asking("Create a table t with an integer id"), tools=[create, CALC])
    response, _ = await run(runtime, asked, FavouringEmbedder("create"))
    assert [c.name for c in response.tool_calls or ()] == ["create_table"]


def test_a_required_file_nobody_named_is_made_up() -> None:
    properties = {"file_path": {"type": "string"}, "include_graphs": {"type": "boolean"}}
    params = {"type": "object", "required": ["file_path"], "properties": properties}

    def asked(text: str) -> Any:
        return request(messages=[{"role": "user", "content": text, "timestamp": 1}]).messages

    chart = asked("Explain bar chart of Patient.")
    assert lt.made_up({"file_path": "path/to/summary_statistics.csv"}, params, chart) == ["file_path"]
    # its words were given, not a file's name: made up from the words
    assert lt.made_up({"file_path": "data/patient_chart.png"}, params, chart) == ["file_path"]
    assert lt.made_up({"file_path": "Patient.csv"}, params, chart) == []  # "Patient." ends a sentence: its stem
    tips = asked("My cat keeps scratching the sofa, any tips?")
    assert lt.made_up({"file_path": "cat_scratching_sofa.txt"}, params, tips) == ["file_path"]
    assert lt.made_up({"file_path": "notes/Sales-Q3.xlsx"}, params, asked("Summarise Sales Q3.xlsx")) == []
    assert lt.made_up({"file_path": "sales_q3.xlsx"}, params, asked("Summarise Sales Q3.xlsx")) == []
    assert lt.made_up({"file_path": "会议纪要.md"}, params, asked("打开会议纪要")) == []
    assert lt.made_up({"file_path": "meeting_notes.md"}, params, asked("打开会议纪要")) == ["file_path"]
    assert lt.made_up({"file_path": "."}, params, chart) == []  # no name: the folder the tool starts from
    profile = {"type": "object", "required": ["profile"], "properties": {"profile": {"type": "string"}}}
    assert lt.made_up({"profile": "premium tier"}, profile, chart) == []  # "profile" names no file


def test_a_chinese_request_with_no_number_of_its_own_makes_a_formula_made_up() -> None:
    params = {"type": "object", "required": ["expression"], "properties": {"expression": {"type": "string"}}}

    def asked(text: str) -> Any:
        return request(messages=[{"role": "user", "content": text, "timestamp": 1}]).messages

    assert lt.made_up({"expression": "37"}, params, asked("人体正常体温是多少度？")) == ["expression"]
    boiling = asked("在一个标准大气压下，水的沸点是多少摄氏度？")  # 一个: an article, not a number given
    assert lt.made_up({"expression": "100 - 273.15"}, params, boiling) == ["expression"]
    assert lt.made_up({"expression": "360 * 25"}, params, asked("三百六十乘以二十五等于多少？")) == []
    assert lt.made_up({"expression": "1280 / 16 + 7"}, params, asked("帮我算一下 1280 除以 16 再加 7。")) == []
    assert lt.made_up({"expression": "599 * 0.85"}, params, asked("一双鞋打八五折是多少钱？")) == []  # 一双: one pair
    place = {"type": "object", "required": ["lat", "lon"], "properties": {"lat": {}, "lon": {}}}
    assert lt.made_up({"lat": 39.9, "lon": 116.4}, place, asked("北京今天天气怎么样？")) == [], "a place's coordinates"


async def test_a_question_without_i_or_my_is_still_sent_to_the_notes_search_the_model_picked() -> None:
    """The notes hold the user's documents, whatever they are about: "How long is the warranty of the Metona X1?"
    asks about an imported manual (the demo's document step) though it says nothing of the one asking (a model's
    name of letters and digits: what a document may describe, :func:`localtools.not_the_users`)."""
    runtime = ScriptedRuntime(['notes_search"'], ['{"query": "Metona X1 warranty"}'])
    asked = request(messages=_asking("How long is the warranty of the Metona X1?"), tools=[NOTES_SEARCH, CALC])
    response, _ = await run(runtime, asked)
    assert response.tool_calls and response.tool_calls[0].name == "notes_search"


def test_a_quoted_text_is_given_as_quoted_where_the_model_wrote_its_own() -> None:
    properties = {"text": {"type": "string"}, "targetLang": {"type": "string"}, "style": {"type": "string", "enum": [
        "formal", "plain"]}}  # fmt: skip
    params = {"type": "object", "required": ["text", "targetLang"], "properties": properties}

    def asked(text: str) -> Any:
        return request(messages=[{"role": "user", "content": text, "timestamp": 1}]).messages

    german = asked("how do you say 'Where is the nearest pharmacy?' in German")
    translated = {"text": "Wo ist die nächste Apotheke?", "targetLang": "de"}
    assert lt.quoted_as_given(translated, params, german) == {
        "text": "Where is the nearest pharmacy?",
        "targetLang": "de",
    }
    given = {"text": "Where is the nearest pharmacy?", "targetLang": "de"}
    assert lt.quoted_as_given(given, params, german) == given
    two = asked("say 'good morning' and 'good night' in German")  # two quotes: which one is not known
    assert lt.quoted_as_given({"text": "Guten Morgen", "targetLang": "de"}, params, two)["text"] == "Guten Morgen"
    said = asked("Translate 'Where is the station?' for my German trip")  # a text with a word said: the model's own
    own = {"text": "Where is the train station?", "targetLang": "de"}
    assert lt.quoted_as_given(own, params, said) == own
    apostrophe = asked("how do you say 'I don't know' in German")  # no quote of its own: "'I don'" is none
    assert lt.quoted_as_given({"text": "Ich weiss nicht", "targetLang": "de"}, params, apostrophe)["text"] == (
        "Ich weiss nicht"
    )
    send = {"type": "object", "required": ["to", "text"], "properties": {"to": {}, "text": {}}}  # no target language
    spanish = {"to": "Maria", "text": "Estaré allí a las ocho"}
    assert lt.quoted_as_given(spanish, send, asked('Text Maria in Spanish: "I will be there at 8"')) == spanish
    assert lt.quoted_as_given(spanish, send, asked('Translate "I will be there at 8" and text it to Maria')) == spanish


def test_an_optional_string_the_conversation_never_gave_a_word_of_is_left_to_its_default() -> None:
    properties = {
        "query": {"type": "string"},
        "glob": {"type": "string"},
        "mode": {"type": "string", "enum": ["fts", "vector"]},
        "when": {"type": "string"},
    }
    params = {"type": "object", "required": ["query"], "properties": properties}

    def asked(text: str) -> Any:
        return request(messages=[{"role": "user", "content": text, "timestamp": 1}]).messages

    falcon = asked("Which of my files mention Project Falcon?")
    args = {"query": "Project Falcon", "glob": "*.md", "mode": "vector", "when": "2026-12-05"}
    assert lt.unasked(args, params, falcon) == {"query": "Project Falcon"}  # a date where none was spoken of
    since = asked("Which of my files mention Project Falcon since last week?")
    assert lt.unasked(args, params, since) == {"query": "Project Falcon", "when": "2026-12-05"}  # worked out
    assert lt.unasked(args, params, asked("哪些文件提到了猎鹰项目？上周以来的"))["when"] == "2026-12-05"
    now = asked("Could you tell me the current temperature in Hyderabad, India, in Celsius?")
    assert lt.unasked({"query": "Hyderabad", "when": "2023-04-15 12:00:00"}, params, now) == {"query": "Hyderabad"}
    assert lt.unasked(args, params, asked("Which .md files mention Project Falcon?"))["glob"] == "*.md"
    assert lt.unasked({"query": "x", "glob": "2024"}, params, falcon) == {"query": "x"}  # a number nobody gave
    assert lt.unasked({"query": "x", "glob": ["your_glob_here"]}, params, falcon) == {"query": "x"}  # a placeholder
    tennis = asked("Who is ranked as the top player in woman tennis?")  # the word's other number is its word
    assert lt.unasked({"query": "tennis", "glob": "women"}, params, tennis) == {"query": "tennis", "glob": "women"}
    kids = {"query": "x", "glob": "children"}
    assert lt.unasked(kids, params, asked("a child")) == kids
    assert lt.unasked({"query": "x", "glob": "men"}, params, tennis) == {"query": "x"}
    assert lt.unasked({"query": "Nothing said"}, params, falcon) == {"query": "Nothing said"}  # required
    # an optional enum's choice nobody asked for is left to its default; one a word of the request names is kept
    assert lt.unasked({"query": "x", "mode": "vector"}, params, asked("What did I note about vector clocks?")) == {
        "query": "x",
        "mode": "vector",
    }
    zh = asked("在笔记里找找关于 Project Falcon 的内容")  # a Chinese request never spells the English choice
    assert lt.unasked({"query": "Project Falcon", "mode": "vector"}, params, zh)["mode"] == "vector"
    laundry = {"type": "object", "properties": {"in_unit_laundry": {"type": "string", "enum": ["True", "False"]}}}
    have = asked("A place to buy with 3 bedrooms; I have laundry services.")  # a yes or a no is worked out
    assert lt.unasked({"in_unit_laundry": "True"}, laundry, have) == {"in_unit_laundry": "True"}
    # a tool that changes things keeps its choices: write_file's default, overwrite, would lose the file
    modes = {"type": "object", "properties": {"mode": {"type": "string", "enum": ["overwrite", "append"]}}}
    add = asked("Add a line 'buy milk' to todo.txt")
    assert lt.unasked({"mode": "append"}, modes, add, changes=True) == {"mode": "append"}
    assert lt.unasked({"mode": "append"}, modes, add) == {}  # a look-up's choice nobody asked for is let go
    # a choice that is the short form of a word the request gave was asked for
    kinds = {"type": "object", "properties": {"type": {"type": "string", "enum": ["py", "txt", "md", "json"]}}}
    assert lt.unasked({"type": "txt"}, kinds, asked("Show me all the text files, hidden ones too")) == {"type": "txt"}
    assert lt.unasked({"type": "md"}, kinds, asked("List the Markdown notes")) == {"type": "md"}
    assert lt.unasked({"type": "py"}, kinds, asked("List the files of the project")) == {}
    assert lt.unasked({"type": "json"}, kinds, asked("List the jobs")) == {}  # not the letters of a word it gave
    travel = {"type": "object", "properties": {"mode": {"type": "string", "enum": ["driving", "walking"]}}}
    assert lt.unasked({"mode": "driving"}, travel, asked("How long is the drive to Boston?")) == {"mode": "driving"}
    assert lt.unasked({"mode": "driving"}, travel, asked("How far is Boston?")) == {}


def test_an_optional_number_written_as_digits_is_kept_only_when_something_gave_it() -> None:
    years = {"type": "string", "enum": ["2010", "2011", "dontcare"], "description": "The year (default dontcare)"}
    ids = {"type": "string", "description": "The province: 1 for Bangkok, 2 for Chiang Mai."}
    params = {"type": "object", "required": ["artist"], "properties": {"artist": {"type": "string"}, "year": years}}
    params["properties"] |= {"province_id": ids, "seats": {"type": "string"}}

    def asked(text: str) -> Any:
        return request(messages=[{"role": "user", "content": text, "timestamp": 1}]).messages

    songs = asked("Pop songs by Harris J from the Salam album")  # a year of the enum nobody gave: its default
    assert lt.unasked({"artist": "Harris J", "year": "2010"}, params, songs, changes=True) == {"artist": "Harris J"}
    released = asked("Songs by Harris J released in 2010")
    assert lt.unasked({"artist": "Harris J", "year": "2010"}, params, released)["year"] == "2010"
    cleaning = asked("A cleaner in Bangkok for two seats")  # its description gives the id; a number in words
    assert lt.unasked({"artist": "x", "province_id": "1", "seats": "2"}, params, cleaning) == {
        "artist": "x",
        "province_id": "1",
        "seats": "2",
    }
    assert lt.unasked({"artist": "x", "seats": "12"}, params, asked("Book a table at 12 Oak Street")) == {
        "artist": "x",
        "seats": "12",
    }


def test_a_date_takes_the_day_the_request_states_from_an_optional_count() -> None:
    count = {"type": "number", "description": "How many adults. (integer, default 1)"}
    params = {"type": "object", "required": ["to", "date"], "properties": {"number_of_adults": count}}
    params["properties"] |= {"to": {"type": "string"}, "date": {"type": "string"}}
    train = {"to": "Portland, OR", "date": "04/22/2023", "number_of_adults": 22}
    assert lt.spare_numbers(train, params, "A train to Portland for April 22nd") == {
        "to": "Portland, OR",
        "date": "04/22/2023",
    }
    iso = {"to": "LAX", "date": "2023-04-15T10:30", "number_of_adults": 15}
    assert lt.spare_numbers(iso, params, "Fly to LAX on the 15th at 10:30") == {"to": "LAX", "date": "2023-04-15T10:30"}
    two = {"to": "LAX", "date": "2023-04-15", "number_of_adults": 2}
    assert lt.spare_numbers(two, params, "2 adults to LAX on the 15th") == two  # a count of its own stays
    ten = {"to": "LAX", "date": "2023-10-10T10:30", "number_of_adults": 10}
    assert lt.spare_numbers(ten, params, "10 people to LAX at 10:30 on 2023-10-10") == ten  # not a day written
    tenth = {"to": "LAX", "date": "2023-10-10", "number_of_adults": 10}
    assert lt.spare_numbers(tenth, params, "10 people to LAX on October 10th") == tenth  # one 10 for each


def test_a_name_the_user_wrote_as_its_initials_is_not_made_up() -> None:
    params = {"type": "object", "required": ["from_city", "to_city"], "properties": {}}
    params["properties"] = {"from_city": {"type": "string"}, "to_city": {"type": "string"}}
    bus = request(messages=[{"role": "user", "content": "A bus for 2 from LA to SD", "timestamp": 1}]).messages
    assert lt.made_up({"from_city": "Los Angeles, CA", "to_city": "San Diego, CA"}, params, bus) == []
    assert lt.made_up({"from_city": "Los Angeles, CA", "to_city": "Seattle, WA"}, params, bus) == ["to_city"]


def test_a_formula_whose_numbers_the_conversation_never_gave_is_made_up() -> None:
    params = {"type": "object", "required": ["expression"], "properties": {"expression": {"type": "string"}}}

    def asked(text: str) -> Any:
        return request(messages=[{"role": "user", "content": text, "timestamp": 1}]).messages

    assert lt.made_up({"expression": "366"}, params, asked("How many days are there in a leap year?")) == ["expression"]
    greeting = asked("Good morning! I finally finished my thesis yesterday, feeling pretty great.")
    assert lt.made_up({"expression": "100 * 0.075"}, params, greeting) == ["expression"]
    mondays = asked("Ugh, Mondays. Just got to the office and the coffee machine is broken.")
    assert lt.made_up({"expression": "100 * 0.075"}, params, mondays) == ["expression"], "a weekday has no numbers"
    assert lt.made_up({"expression": "52.52 + 13.40"}, params, asked("Is it cold in Berlin?")) == [], "a city's"
    assert lt.made_up({"expression": "(3 + 4) / 2"}, params, asked("What is the mean of three and four?")) == []
    assert lt.made_up({"expression": "86.40 * 0.15"}, params, asked("A 15% tip on $86.40?")) == []
    assert lt.made_up({"expression": "213000000 / 8515767"}, params, asked("Population density of Brazil?")) == []
    assert lt.made_up({"expression": "sqrt(2)"}, params, asked("What is the square root of it?")) == [], "a word"
    assert lt.made_up({"expression": "487 / 3"}, params, asked("三个人一共花了多少？")) == [], "asked in Chinese"


async def test_a_call_with_a_made_up_name_is_not_made_and_the_answer_is_written() -> None:
    pay = {**tool("make_payment", "receiver"), "description": "Send money to a receiver."}
    ask = [{"role": "user", "content": "I have a transaction, can you do it?", "timestamp": 1}]
    runtime = ScriptedRuntime(['make_payment"'], ['{"receiver": "john_doe"}'], ["Who should receive it?"])
    response, _ = await run(runtime, request(messages=ask, tools=[pay]), FavouringEmbedder("make payment"))
    assert response.tool_calls is None and response.content == "Who should receive it?"
    named = [{"role": "user", "content": "Send Diego his money", "timestamp": 1}]
    runtime = ScriptedRuntime(['make_payment"'], ['{"receiver": "Diego"}'])
    response, _ = await run(runtime, request(messages=named, tools=[pay]), FavouringEmbedder("make payment"))
    assert response.tool_calls and response.tool_calls[0].args == {"receiver": "Diego"}


# ---- issue 32, agent-bilingual-v1's failures as product faults ----------------------------------------------


def test_a_calls_token_budget_follows_the_lengths_its_tool_declares() -> None:
    bounded = {"type": "string", "description": "An expression (at most 500 characters)"}
    expression = {"type": "object", "properties": {"expression": bounded}}
    assert lt.argument_budget(expression) == lt.ARGUMENT_OVERHEAD + 500 + 4  # and a key's quotes and colon
    mode = {"type": "string", "description": "How.", "enum": ["create", "append"]}
    tags = {
        "type": "array",
        "description": "Tags (at most 3 items)",
        "items": {**bounded, "description": "(at most 10 characters)"},
    }
    both = {"type": "object", "properties": {"mode": mode, "tags": tags, "n": {"type": "number", "description": "n"}}}
    assert lt.argument_budget(both) == lt.ARGUMENT_OVERHEAD + len('"append"') + 3 * 12 + 4 * 3
    free = {"type": "object", "properties": {"expression": bounded, "content": {"type": "string", "description": "x"}}}
    assert lt.argument_budget(free) == lt.ARGUMENT_TOKENS  # a string without a bound: a file's content
    unbounded = {"type": "array", "description": "Tags", "items": bounded}
    assert lt.argument_budget({"type": "object", "properties": {"notes": unbounded}}) == lt.ARGUMENT_TOKENS
    # no text among the unbounded strings (a web address, ids, a list of names): what a value copied from the
    # conversation can take, not the 4096 tokens a runaway address ran to (~10 minutes)
    link = {"type": "object", "properties": {"url": {"type": "string", "description": "The address."}}}
    assert lt.argument_budget(link) == lt.SHORT_ARGUMENTS
    assert lt.argument_budget(link, said=3000) == lt.SHORT_ARGUMENTS + 1500
    assert lt.argument_budget(link, said=100_000) == lt.ARGUMENT_TOKENS
    edits = {"type": "array", "items": {"type": "object", "properties": {"newText": {"type": "string"}}}}
    assert lt.argument_budget({"type": "object", "properties": {"edits": edits}}) == lt.ARGUMENT_TOKENS
    headers = {"type": "object", "properties": {"Content-Type": {"type": "string"}, "Accept": {"type": "string"}}}
    assert lt.argument_budget({"type": "object", "properties": {"headers": headers}}) == lt.SHORT_ARGUMENTS
    huge = {"type": "string", "description": "(at most 2097152 characters)"}
    assert lt.argument_budget({"type": "object", "properties": {"content": huge}}) == lt.ARGUMENT_TOKENS


async def test_a_formula_of_numbers_is_written_after_a_plan_that_the_call_leaves_out() -> None:
    calc = {**CALC, "parameters": {"type": "object", "required": ["expression"], "properties": {
        "expression": {"type": "string", "description": "e.g. '(3 + 4) * 2 ** 10 / sqrt(2)'"}}}}  # fmt: skip
    plan = '{"plan": "price per litre: 89.9 yuan / 5 litres", "expression": "89.9 / 5"}'
    runtime = ScriptedRuntime(['calculator"'], [plan])
    messages = [{"role": "user", "content": "5 litres cost 89.9 yuan: how much per litre?", "timestamp": 1}]
    response, _ = await run(runtime, request(messages=messages, tools=[calc]))
    assert response.tool_calls and response.tool_calls[0].args == {"expression": "89.9 / 5"}
    grammar = runtime.payloads[1]["json_schema"]
    assert list(grammar["properties"]) == ["plan", "expression"] and grammar["required"] == ["plan", "expression"]
    assert lt.PLAN_RULE in runtime.payloads[1]["messages"][0]["content"]
    runtime = ScriptedRuntime(['calculator"'], ['{"expression": "37*43"}'])  # "where": no formula asked for
    await run(runtime, request(tools=[CALC]))
    assert "plan" not in runtime.payloads[1]["json_schema"]["properties"]
    assert lt.PLAN_RULE not in runtime.payloads[1]["messages"][0]["content"]


async def test_a_bounded_argument_gets_its_own_budget_and_the_notice_says_which() -> None:
    calc = {**CALC, "parameters": {"type": "object", "required": ["expression"], "properties": {
        "expression": {"type": "string", "description": "e.g. 1 + 2 (at most 500 characters)"}}}}  # fmt: skip
    runtime = ScriptedRuntime(
        ['calculator"'], ['{"expression": "1/4 * 2 * 3 * 4'], ["It is 3."], arguments_finish="length"
    )
    messages = [{"role": "user", "content": "What is 1 + 2?", "timestamp": 1}]
    response, _ = await run(runtime, request(messages=messages, tools=[calc]))
    limit = lt.ARGUMENT_OVERHEAD + 504 + lt.PLAN_TOKENS  # a formula of numbers: its plan's tokens too
    assert runtime.payloads[1]["max_tokens"] == limit
    assert response.tool_calls is None
    assert response.content.startswith(f"(I did not call calculator: its arguments ran past the {limit}-")


@pytest.mark.parametrize(
    ("ask", "wanted"),
    [
        ("Save this to a file: buy milk.", True),
        ("Write the list to a file.", True),
        ("把这段话保存下来：明天九点开会。", True),
        ("帮我找找哪个文件里提到了“报销”。", False),  # speaks of files, asks to find, not to save
        ("Which of my files mention Project Falcon?", False),
        ("Write a haiku about autumn.", False),
    ],
)
def test_only_a_request_to_save_or_to_write_to_a_file_wants_a_file(ask: str, wanted: bool) -> None:
    assert lt.wants_a_file(request(messages=[{"role": "user", "content": ask, "timestamp": 1}]).messages) is wanted


@pytest.mark.parametrize(
    ("ask", "part"),
    [
        ("Compute 19 * 23 and save the result to answer.txt", "Compute 19 * 23"),
        (
            "Find the files that mention invoices, then write their names to list.txt",
            "Find the files that mention invoices",
        ),
        ("Check the weather and then record it in log.md", "Check the weather"),
        ("查一下东京现在几点，并保存到 time.txt", "查一下东京现在几点"),
        ("把 17 乘以 23 算出来，然后把结果写进 答案.txt", "把 17 乘以 23 算出来"),
        ("每期要还多少？保留两位小数，算好后把结果写进 分期.txt", "每期要还多少？保留两位小数，算好"),  # "after"
        ("把最后结果写进 a.txt", None),
        ("Write a haiku about autumn and save it to poem.txt", None),  # the saving is what is asked first
        ("I want you to write a summary into summary.md", None),  # no connective: one clause
        ("Can you save this to notes.md", None),
        ("How do I save a file in vim?", None),
        ("请把结果保存到 a.txt", None),
        ("Sure, save it", None),  # under two words before it
        ("Work out 15.5% of 8,460 plus 1,240. Save the result in bonus.txt", "Work out 15.5% of 8,460 plus 1,240"),
        ("What is 19 * 23? Write it to a.txt", "What is 19 * 23"),  # the end of a sentence
        ("3.5万存3年，一共多少？算完把结果记到 定期.txt 里", "3.5万存3年，一共多少？"),  # done calculating
        ("2400 元的电视分 6 期，每期多少？算好帮我写进 电视.txt", "2400 元的电视分 6 期，每期多少？"),  # asking words
        ("Add 12 and 30, then please save it to sum.txt", "Add 12 and 30"),
        ("Hello. Write a poem to poem.md", None),
        ("My pay is $5,800 a month and I save 22% of it. How much is that a year?", None),  # money saved
        ("我每月工资9000，存下20%，一年一共能存多少？", None),
        ("I earn 4000, then save $300 of it; how much is left?", None),
        (
            "If I cancel my $14.99/month plan, how much would I save in a year? Put the figure in savings.txt",
            "If I cancel my $14.99/month plan, how much would I save in a year",
        ),  # money saved, then the saving
        (
            "把 读书笔记/第三章.md 里的金句挑出来，单独存到 金句.txt 里。",
            "把 读书笔记/第三章.md 里的金句挑出来",
        ),  # an adverb between the connective and the saving
    ],
)
def test_what_a_request_asks_before_saving_is_its_first_part(ask: str, part: str | None) -> None:
    assert lt.before_saving(ask) == part


async def test_a_request_that_saves_an_outcome_is_decided_in_the_users_order() -> None:
    ask = [{"role": "user", "content": "Compute 19 * 23 and save the result to answer.txt", "timestamp": 1}]
    runtime = ScriptedRuntime(['calculator"'], ['{"expression": "19 * 23"}'])
    response, _ = await run(runtime, request(messages=ask, tools=[CALC, WRITE]), FavouringEmbedder("calculator"))
    assert response.tool_calls and response.tool_calls[0].name == "calculator"
    assert runtime.payloads[0]["messages"][-1]["content"] == "Compute 19 * 23"  # the decision saw the first part
    think = [{"role": "user", "content": "Think of a colour and save it to answer.txt", "timestamp": 1}]
    runtime = ScriptedRuntime(
        ['answer"'], ['calculator"'], ['write_file"'], ['{"path": "answer.txt", "content": "teal"}']
    )
    response, _ = await run(runtime, request(messages=think, tools=[CALC, WRITE]))
    assert response.tool_calls and response.tool_calls[0].name == "write_file"  # nothing to do first: the whole
    assert runtime.payloads[2]["messages"][-1]["content"] == think[0]["content"]


async def test_after_a_result_a_write_that_names_no_file_is_not_asked_about() -> None:
    ask = {"role": "user", "content": "我记得笔记里写过咖啡豆开封后该怎么保存，帮我查一下。", "timestamp": 1}
    runtime = ScriptedRuntime(['write_file"'], ["密封罐，避光。"])
    response, _ = await run(runtime, request(messages=[ask, *HISTORY[1:]], tools=[CALC, PERMITTED_WRITE]))
    assert response.tool_calls is None and response.content == "密封罐，避光。"  # answered, not "which file?"


READ_FILE = {
    **tool("read_file", "path"),
    "description": "Read a text file in the workspace.",
    "parameters": {"type": "object", "required": ["path"], "properties": {
        "path": {"type": "string", "description": "Relative path."}}},
}  # fmt: skip
NOTES = {**tool("knowledge_search", "query"), "description": "Search the user's notes."}


async def test_a_request_that_names_a_file_is_not_answered_from_nothing() -> None:
    ask = {"role": "user", "content": "According to docs/2024/plan.md, when is the beta?", "timestamp": 1}
    runtime = ScriptedRuntime(['read_file"'], ['{"path": "docs/2024/plan.md"}'])
    response, _ = await run(runtime, request(messages=[ask], tools=[NOTES, CALC, READ_FILE]), FavouringEmbedder("calc"))
    assert response.tool_calls and response.tool_calls[0].args == {"path": "docs/2024/plan.md"}
    decision = runtime.payloads[0]
    assert decision["regex"] == lt.choice_regex(["read_file"], answer=False)  # the tools for files only
    plain = {"role": "user", "content": "When is the beta?", "timestamp": 1}
    runtime = ScriptedRuntime(['answer"'], ['read_file"'], ["Soon."])
    await run(runtime, request(messages=[plain], tools=[NOTES, CALC, READ_FILE]))
    assert runtime.payloads[0]["regex"] == lt.choice_regex(["knowledge_search", "calculator", "read_file"])
    assert lt.works_on_files(defs(READ_FILE)[0]) and not lt.works_on_files(defs(NOTES)[0])
    git = {**tool("git_add", "repo_path"), "description": "Stage files."}
    assert lt.works_on_files(defs(git)[0])


async def test_a_request_that_gives_a_web_address_is_decided_among_the_tools_that_take_one() -> None:
    fetch = {**tool("fetch", "url"), "description": "Fetch a URL and return its content as markdown."}
    ask = {"role": "user", "content": "Please read https://peps.python.org/pep-0008/ and summarize it", "timestamp": 1}
    runtime = ScriptedRuntime(['fetch"'], ['{"url": "https://peps.python.org/pep-0008/"}'])
    response, _ = await run(runtime, request(messages=[ask], tools=[READ_FILE, fetch, CALC]))
    assert response.tool_calls and response.tool_calls[0].name == "fetch"
    assert runtime.payloads[0]["regex"] == lt.choice_regex(["fetch"], answer=False)
    plain = {"role": "user", "content": "What is PEP 8 about?", "timestamp": 1}
    runtime = ScriptedRuntime(['answer"'], ['fetch"'], ["Style."])
    await run(runtime, request(messages=[plain], tools=[READ_FILE, fetch, CALC]))
    assert runtime.payloads[0]["regex"] == lt.choice_regex(["read_file", "fetch", "calculator"])
    page = {**tool("open_page", "page_url"), "description": "Open a page."}
    assert [t.name for t in lt.named_url_tools(defs(fetch, page, CALC), request(messages=[ask]).messages)] == [
        "fetch",
        "open_page",
    ]
    assert lt.named_url_tools(defs(CALC), request(messages=[ask]).messages) == []  # none takes one: as before
    zh = {"role": "user", "content": "从第5000个字符开始接着读 https://blog.example.cn/post/42，谢谢", "timestamp": 1}
    assert lt.named_url_tools(defs(fetch), request(messages=[zh]).messages)


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        ("在 日记 文件夹里建一个 2024-12-03.md，写上：交了报名表", ["日记/2024-12-03.md"]),
        ("在日记文件夹里建一个 a.md", ["日记/a.md"]),
        ("把 a.md 和 b.md 存到「归档」这个目录", ["归档/a.md", "归档/b.md"]),
        ("Put a file todo.md in the drafts folder", ["drafts/todo.md"]),
        ("在src/目录下新建 main.py", ["src/main.py"]),
        ("Read docs/a.md in the docs folder", ["docs/a.md"]),  # a name with its own folder stays as it is
        ("Copy a.md from the src folder into the docs folder", ["a.md"]),  # two folders: which is whose, unknown
        ("read README.md", ["README.md"]),
        ("这个项目根目录下的 LICENSE 文件用的是哪种开源协议？", ["LICENSE"]),  # which folder, not a name
        ("在当前目录新建 a.md", ["a.md"]),
        ("把 a.md 放到同一个文件夹", ["a.md"]),
        ("Create notes.md in the current folder", ["notes.md"]),
        ("Save it as b.txt in the root directory", ["b.txt"]),
        ("Put c.md in my folder", ["c.md"]),
        ("Move d.md to the folder", ["d.md"]),
        ("Read README.md and list the docs folder", ["README.md"]),  # another clause
        ("读一下 说明.md，然后看看 归档 文件夹里有什么", ["说明.md"]),
        ("Put a.md, b.md and c.md in the docs folder", ["docs/a.md", "docs/b.md", "docs/c.md"]),  # a list of names
    ],
)
def test_a_file_named_apart_from_its_folder_is_in_that_folder(text: str, paths: list[str]) -> None:
    assert lt.request_paths(request(messages=[{"role": "user", "content": text, "timestamp": 1}]).messages) == paths


def test_a_folder_named_without_a_file_changes_nothing() -> None:
    assert lt.named_folder("看看「照片整理」这个文件夹里现在都有些什么。") == "照片整理"
    assert lt.named_folder("看看 合同 文件夹里有哪些合同") == "合同"  # ends in 同 ("the same") but is a name
    assert lt.named_folder("看看 日本 文件夹") == "日本" and lt.named_folder("项目根目录里有什么") is None
    assert lt.named_folder("Which file in the docs folder mentions the rate limit?") == "docs"
    assert lt.in_folder([], "in the docs folder") == []
    assert lt.named_folder("What is a folder?") is None
    assert (
        lt.named_folder("把它存到 资料/合同 里") == "资料/合同"
        and lt.named_folder("explain flow control in TCP/IP") is None
    )
    assert lt.named_folder("what is in docs/readme.md?") is None  # a file's path is no folder


def test_a_tool_that_works_in_a_folder_is_given_the_folder_the_request_names() -> None:
    from sidecar.agent.tools.builtin import default_registry

    tools = {t.name: t for t in default_registry().definitions(["read_file", "write_file", "list_directory",
                                                                  "search_files", "calculator"])}  # fmt: skip
    assert {n for n, t in tools.items() if lt.on_a_folder(t)} == {"list_directory", "search_files"}
    info = {**tool("get_file_info", "path"), "description": "Retrieve detailed metadata about a file or directory."}
    assert not lt.on_a_folder(MetonaToolDef.model_validate(info))  # a file or a folder
    schema = lt.arguments_schema(tools["search_files"].parameters.model_dump(mode="json", exclude_none=True))
    grounded = lt.ground_folder(schema, "笔记")
    assert grounded["properties"]["path"] == {"type": "string", "enum": ["笔记"]} and "path" in grounded["required"]
    assert grounded["properties"]["query"] == schema["properties"]["query"]
    assert lt.ground_folder({"type": "object", "properties": {}}, "docs") == {"type": "object", "properties": {}}


def test_a_request_that_names_only_files_is_not_offered_the_tools_that_work_in_a_folder() -> None:
    from sidecar.agent.tools.builtin import default_registry

    tools = default_registry().definitions(["read_file", "list_directory", "search_files", "calculator"])

    def offered_for(text: str) -> list[str]:
        asked = request(messages=[{"role": "user", "content": text, "timestamp": 1}]).messages
        return [t.name for t in lt.named_file_tools(tools, asked)]

    assert offered_for("According to docs/2024/plan.md, when is the beta?") == ["read_file"]
    assert offered_for("Read README.md, then list what is in the docs folder") == [
        "read_file",
        "list_directory",
        "search_files",
    ]
    assert offered_for("What does the Makefile do?") == ["read_file"]  # a conventional file name is a file
    assert offered_for("项目里那个 Dockerfile 用的是哪个基础镜像？") == ["read_file"]
    assert offered_for("What is in the build directory?") == []  # a folder named: no file
    assert offered_for("What is a hash table?") == []


async def test_a_search_in_a_named_folder_searches_that_folder() -> None:
    from sidecar.agent.tools.builtin import default_registry

    (search,) = default_registry().definitions(["search_files"])
    ask = [{"role": "user", "content": "在 归档 文件夹里搜一下，哪些文件提到了发票？", "timestamp": 1}]
    runtime = ScriptedRuntime(['search_files"'], ['{"query": "发票", "path": "归档"}'])
    tools = [search.model_dump(mode="json", by_alias=True, exclude_none=True)]
    response, _ = await run(runtime, request(messages=ask, tools=tools), FavouringEmbedder("search files"))
    assert response.tool_calls and response.tool_calls[0].args == {"query": "发票", "path": "归档"}
    assert runtime.payloads[1]["json_schema"]["properties"]["path"]["enum"] == ["归档"]


async def test_a_read_in_a_named_folder_with_no_file_named_lists_the_folder_first() -> None:
    from sidecar.agent.tools.builtin import default_registry

    tools = [t.model_dump(mode="json", by_alias=True, exclude_none=True)
             for t in default_registry().definitions(["read_file", "list_directory", "search_files"])]  # fmt: skip
    ask = [
        {"role": "user", "content": "看看 合同 文件夹里有哪些合同，把日期最新的那份打开，告诉我金额", "timestamp": 1}
    ]
    far = math.log(lt.RELEVANT_P) - 1  # unsure, and far: a pick the relevance bar would turn down
    runtime = ScriptedRuntime(['read_file"'], ['{"path": "合同"}'], score=far)
    response, _ = await run(runtime, request(messages=ask, tools=tools), FavouringEmbedder("calc"))
    assert response.tool_calls and (response.tool_calls[0].name, response.tool_calls[0].args) == (
        "list_directory",
        {"path": "合同"},
    )
    assert runtime.payloads[1]["prefix"] == '{"tool": "list_directory", "arguments": '
    named = [{"role": "user", "content": "Open plan.md in the docs folder", "timestamp": 1}]  # a file named: read
    runtime = ScriptedRuntime(['read_file"'], ['{"path": "docs/plan.md"}'])
    response, _ = await run(runtime, request(messages=named, tools=tools), FavouringEmbedder("read"))
    assert response.tool_calls and response.tool_calls[0].name == "read_file"


async def test_a_search_for_the_newest_file_of_a_named_folder_lists_the_folder_first() -> None:
    """A search matches what files say, not which is latest: asked for the newest file of a named folder, quoting
    nothing to find, a search picked lists the folder first; a quoted text to find keeps the search."""
    from sidecar.agent.tools.builtin import default_registry

    tools = [t.model_dump(mode="json", by_alias=True, exclude_none=True)
             for t in default_registry().definitions(["read_file", "list_directory", "search_files"])]  # fmt: skip
    for ask in ("Open the latest report in the reports folder, tell me its total.", "把 周报 文件夹里最新的那份打开"):
        runtime = ScriptedRuntime(['search_files"'], ['{"path": "x"}'])
        response, _ = await run(runtime, request(messages=_asking(ask), tools=tools), FavouringEmbedder("search"))
        assert response.tool_calls and response.tool_calls[0].name == "list_directory", ask
    assert lt.asks_the_newest("最近的一份周报是哪天的？") and lt.asks_the_newest("What's the newest file?")
    assert not lt.asks_the_newest('Find the most recent file that says "invoice"')  # a text to find: the search's
    assert not lt.asks_the_newest("Open the report from last week")


async def test_a_quoted_line_asked_about_is_not_read_from_a_made_up_file() -> None:
    """A question after the source of a quoted line read ``poems/<the line>.txt``: with no file or folder named or
    spoken of, a read picked for a request that quotes a text is not made; the answer is written."""
    tools = [READ_FILE, FIND]
    ask = "“白日依山尽”出自哪首诗？"
    runtime = ScriptedRuntime(['read_file"'], ["出自《登鹳雀楼》。"])
    response, _ = await run(runtime, request(messages=_asking(ask), tools=tools), FavouringEmbedder("read"))
    assert not response.tool_calls and response.content == "出自《登鹳雀楼》。"
    assert len(runtime.payloads) == 2 and "json_schema" not in runtime.payloads[1]  # no path written
    (read, _find) = defs(*tools)
    assert lt.reads_a_guess(read, request(messages=_asking('Who said "less is more"?')).messages)
    kept_ones = ('Open "plan v2.md"', "在 诗集 文件夹里找“白日依山尽”", 'Which file says "less is more"?', "Read it")
    for kept in kept_ones:
        assert not lt.reads_a_guess(read, request(messages=_asking(kept)).messages), kept
    (find_in_folder,) = defs({**FIND, "parameters": {**FIND["parameters"], "required": ["query", "path"]}})
    assert lt.takes_a_file(find_in_folder) and not lt.reads_a_file(find_in_folder)  # a plugin's search: no read
    assert not lt.reads_a_guess(find_in_folder, request(messages=_asking('Look for "less is more"')).messages)


def _turn(ask: str, *calls: tuple[str, dict[str, Any], bool, Any]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": ask, "timestamp": 1}]
    for i, (name, args, ok, summary) in enumerate(calls):
        call = {**CALL, "id": f"c{i}", "name": name, "args": args}
        result = {**RESULT, "toolCallId": f"c{i}", "toolName": name, "result": summary, "summary": str(summary),
                  "success": ok, **({} if ok else {"error": summary})}  # fmt: skip
        messages += [{"role": "assistant", "content": "", "toolCalls": [call], "timestamp": 2},
                     {"role": "tool", "content": "", "toolResult": result, "timestamp": 3}]  # fmt: skip
    return messages


async def test_a_request_to_open_the_file_a_search_found_reads_it_next() -> None:
    matches = {"path": ".", "matches": [{"path": "events/offsite logistics.md", "kind": "content", "line": 1}]}
    found = ("search_files", {"query": "Lisbon offsite"}, True, matches)
    messages = _turn("Which file has the details for the Lisbon offsite? Open it and tell me the hotel.", found)
    assert lt.to_open(request(messages=messages).messages) == ["events/offsite logistics.md"]
    runtime = ScriptedRuntime(['read_file"'], ['{"path": "events/offsite logistics.md"}'], score=math.log(0.1))
    response, _ = await run(runtime, request(messages=messages, tools=[FIND, READ_FILE]))
    assert response.tool_calls and response.tool_calls[0].args == {"path": "events/offsite logistics.md"}
    assert runtime.payloads[0]["regex"] == lt.choice_regex(["read_file"], answer=False)  # a read is due
    assert runtime.payloads[1]["json_schema"]["properties"]["path"]["enum"] == ["events/offsite logistics.md"]
    read = ("read_file", {"path": "events/offsite logistics.md"}, True, {"path": "events/offsite logistics.md"})
    assert lt.to_open(request(messages=_turn("Open it.", found, read)).messages) == []  # read already
    folder = _turn("Open the events folder and tell me what is there", found)
    assert lt.to_open(request(messages=folder).messages) == []  # a folder opened, not a file
    assert lt.to_open(request(messages=_turn("Which file mentions Lisbon?", found)).messages) == []  # no opening


async def test_after_a_result_a_file_is_read_only_when_named_or_seen() -> None:
    found = ("knowledge_search", {"query": "tire pressure"}, True, "[1] Road bike (note n1): 80 psi")
    messages = _turn("What tire pressure did I note for my road bike?", found)
    runtime = ScriptedRuntime(['read_file"'], ["80 psi."])
    response, _ = await run(runtime, request(messages=messages, tools=[NOTES, READ_FILE]))
    assert response.tool_calls is None and response.content == "80 psi."  # no file to read: a name made up
    listed = ("list_directory", {"path": "docs"}, True, {"entries": [{"path": "docs/api.md"}]})
    messages = _turn("What does the API doc in docs say?", listed)
    runtime = ScriptedRuntime(['read_file"'], ['{"path": "docs/api.md"}'])
    response, _ = await run(runtime, request(messages=messages, tools=[NOTES, READ_FILE]))
    assert response.tool_calls and response.tool_calls[0].args == {"path": "docs/api.md"}
    assert runtime.payloads[1]["json_schema"]["properties"]["path"]["enum"] == lt.known_paths(
        request(messages=messages).messages
    )


async def test_a_failed_read_of_the_file_to_write_leaves_it_to_the_write() -> None:
    calc = ("calculator", {"expression": "468 * 0.85 + 63"}, True, "468 * 0.85 + 63 = 460.8")
    missing = ("read_file", {"path": "结果.txt"}, False, "no such file: 结果.txt")
    messages = _turn("算一下 468 乘以 0.85 再加 63，然后把结果写进 结果.txt。", calc, missing)
    assert lt.unfinished(request(messages=messages).messages)
    runtime = ScriptedRuntime(['write_file"'], ["460.8"], ['{"path": "结果.txt", "size": 5}'])
    response, _ = await run(runtime, request(messages=messages, tools=[CALC, READ_FILE, PERMITTED_WRITE]))
    assert runtime.payloads[0]["regex"] == lt.choice_regex(["write_file"], answer=False)
    assert response.tool_calls and response.tool_calls[0].args["path"] == "结果.txt"


def test_a_failed_call_that_named_no_file_does_not_force_the_write() -> None:
    refused = ("calculator", {"expression": "7.5% * 348.80"}, False, "syntax error")
    assert not lt.unfinished(
        request(messages=_turn("Work out 7.5% tax on 348.80, save it in tax.txt.", refused)).messages
    )
    ok = ("calculator", {"expression": "348.80 * 0.075"}, True, "26.16")
    both = _turn("Work out 7.5% tax on 348.80, save it in tax.txt.", ok, refused)
    assert not lt.unfinished(request(messages=both).messages)
    assert lt.unfinished(request(messages=_turn("Work out 7.5% tax on 348.80, save it in tax.txt.", ok)).messages)
    missing = ("read_file", {"path": "a.txt"}, False, "no such file")
    assert not lt.unfinished(request(messages=_turn("Read a.txt and summarise it", missing)).messages)


def test_the_file_a_read_read_in_place_of_a_cut_name_is_done() -> None:
    meant = {"path": "Project Docs/notes v2.md", "content": "Point of contact: Priya Raman"}
    read = ("read_file", {"path": "v2.md"}, True, meant)
    messages = request(messages=_turn("Check Project Docs/notes v2.md — who is our contact?", read)).messages
    assert "Project Docs/notes v2.md" in lt.request_paths(messages)  # seen in the result, then named by the request
    assert lt.untouched_paths(messages) == [] and not lt.unfinished(messages)
    listed = ("list_directory", {"path": "docs"}, True, {"path": "docs", "entries": [{"path": "docs/a.md"}]})
    messages = request(messages=_turn("List docs, then read docs/a.md", listed)).messages
    assert lt.untouched_paths(messages) == ["docs/a.md"]  # a folder's listing has not worked on its files


async def test_a_named_file_is_written_only_when_the_request_asks_for_a_change() -> None:
    read_it = {"role": "user", "content": "帮我看一下 会议纪要.md，下次开会之前谁负责准备预算表？", "timestamp": 1}
    runtime = ScriptedRuntime(['read_file"'], ['{"path": "会议纪要.md"}'])
    response, _ = await run(runtime, request(messages=[read_it], tools=[NOTES, PERMITTED_WRITE, READ_FILE]))
    assert runtime.payloads[0]["regex"] == lt.choice_regex(["read_file"], answer=False)  # no write offered
    assert response.tool_calls and response.tool_calls[0].name == "read_file"
    found = ("knowledge_search", {"query": "会议纪要.md"}, True, "[1] 咖啡豆保存")
    runtime = ScriptedRuntime(['write_file"'], ["王磊。"])  # the model names the write after the search
    response, _ = await run(
        runtime, request(messages=_turn(read_it["content"], found), tools=[NOTES, PERMITTED_WRITE, READ_FILE])
    )
    assert response.tool_calls is None and response.content == "王磊。"  # not written: answered
    (write,) = defs(PERMITTED_WRITE)
    assert not lt.grounded(write, request(messages=[read_it]).messages)
    save = {"role": "user", "content": "把结果写进 结果.txt。", "timestamp": 1}
    assert lt.grounded(write, request(messages=[save]).messages)
    for text, change in (("我在 笔记.md 里写了什么？", False), ("What is in app.log?", False),
                         ("在 日记 文件夹里建一个 2024-12-03.md，写上：交了报名表", True),
                         ("Read groceries.txt and put the urgent items into urgent.txt", True),
                         ("Which version added CSV export? Should be in the CHANGELOG.", False),
                         ("What did I add to groceries.txt yesterday?", False),
                         ("哪个版本加上了导出功能？看 CHANGELOG。", False),
                         ("What is 3*4? Save the result in r.txt", True),
                         ("能帮我把结果存到 a.txt 吗？", True)):  # fmt: skip
        assert lt.asks_for_a_change(request(messages=[{**save, "content": text}]).messages) is change, text


async def test_a_long_question_is_not_asked_again_after_the_results() -> None:
    long = "What is 37*43? " + "Some pasted context. " * 40
    runtime = ScriptedRuntime(['answer"'], ["1591."])
    await run(runtime, request(messages=[{**HISTORY[0], "content": long}, *HISTORY[1:]], tools=[CALC]))
    text = runtime.payloads[-1]["messages"][-1]["content"]
    assert text.count("Some pasted context.") == 40 and "Question:" not in text
    runtime = ScriptedRuntime(['answer"'], ["1591。"])
    await run(runtime, request(messages=[{**HISTORY[0], "content": "37乘43等于多少？"}, *HISTORY[1:]], tools=[CALC]))
    assert runtime.payloads[-1]["messages"][-1]["content"].endswith(
        "问题：37乘43等于多少？\n" + local_module.ANSWER_AFTER_TOOLS_ZH
    )


@pytest.mark.parametrize(("installed", "slot"), [(True, "arguments"), (False, None)])
async def test_the_answer_from_tool_results_is_written_by_the_arguments_model_where_it_writes_arguments(
    monkeypatch: pytest.MonkeyPatch, installed: bool, slot: str | None
) -> None:
    """After a result the answer reads it: the larger model where it is in use; the decision stays on the
    model asked, and a plain answer without results too."""
    from sidecar.localmodel import assets

    monkeypatch.setattr(assets, "arguments_status", lambda: (installed, None if installed else "missing"))
    monkeypatch.setattr(assets, "physical_memory", lambda: 16 * GIB)
    runtime = ScriptedRuntime(['answer"'], ["It is ", "1591."])
    response, _ = await run(runtime, request(messages=HISTORY, tools=[CALC, TIME]))
    assert response.content == "It is 1591."
    decision, answer = runtime.payloads
    assert "slot" not in decision and answer.get("slot") == slot and "regex" not in answer
    assert answer["messages"][-1]["content"].endswith(
        "\n\nQuestion: What is 37*43?\n" + local_module.ANSWER_AFTER_TOOLS
    )  # the question asked again after the results
    runtime = ScriptedRuntime(['answer"'], ['calculator"'], ["Hello."])
    await run(runtime, request(messages=_asking("Say hello to the team."), tools=[CALC]))
    assert [p.get("slot") for p in runtime.payloads] == [None, None, None]  # no results, no fact: the deciding model


@pytest.mark.parametrize(
    ("ask", "args", "rest"),
    [
        ("Open receipts/may.csv and add up what I spent", {"path": "receipts/may.csv"}, "add up what I spent"),
        ("Read may.csv, then give me the average", {"path": "data/may.csv"}, "then give me the average"),
        ("打开 账单/五月.csv，把支出加起来一共多少？", {"path": "账单/五月.csv"}, "把支出加起来一共多少？"),
        ("看下 分数.txt 再算平均分是多少", {"path": "分数.txt"}, "算平均分是多少"),
        ("What does settings.yaml say the port is?", {"path": "settings.yaml"}, None),  # nothing after it
        ("Open it and add the numbers up", {"path": "a.csv"}, None),  # the request writes none of the arguments
        ("Read a.csv, thanks", {"path": "a.csv"}, None),  # under two words
    ],
)
def test_what_remains_of_a_request_follows_the_part_its_calls_served(
    ask: str, args: dict[str, Any], rest: str | None
) -> None:
    assert lt.what_remains(ask, [("read_file", args)]) == rest


SUM = {
    **tool("calculator", "expression"),
    "description": "Evaluate an arithmetic expression.",
    "parameters": {"type": "object", "required": ["expression"], "properties": {
        "expression": {"type": "string", "description": "Arithmetic, e.g. '(3 + 4) * 2'."}}},
}  # fmt: skip
SPENT = ("read_file", {"path": "receipts/may.csv"}, True, "item,amount\ncoffee,4.75\nlunch,12.40")


async def test_what_remains_after_a_read_is_computed_from_the_results_when_the_model_would_read_again() -> None:
    """Shown the whole request and the read, the model named the read again: what the request asks after the read
    is decided on its own, with the content, among the tools that compute; the formula is written in the
    results' numbers (digits and operators only)."""
    messages = _turn("Open receipts/may.csv and add up what I spent", SPENT)
    runtime = ScriptedRuntime(['read_file"'], ['calculator"'], ['{"plan": "sum", "expression": "4.75 + 12.40"}'])
    response, _ = await run(runtime, request(messages=messages, tools=[READ_FILE, SUM]), FavouringEmbedder("calc"))
    assert response.tool_calls and response.tool_calls[0].name == "calculator"
    assert response.tool_calls[0].args == {"expression": "4.75 + 12.40"}
    _first, part, arguments = runtime.payloads
    assert part["regex"] == lt.choice_regex(["calculator"])  # the tools not yet called that compute, and answer
    assert part["messages"][-1] == {
        "role": "user",
        "content": "add up what I spent\n\nitem,amount\ncoffee,4.75\nlunch,12.40",
    }
    assert arguments["messages"][1:] == part["messages"][1:]
    assert arguments["json_schema"]["properties"]["expression"]["pattern"] == lt.FORMULA_OF_NUMBERS


@pytest.mark.parametrize(
    ("ask", "score", "favoured", "payloads"),
    [
        ("Open receipts/may.csv and add up what I spent", math.log(0.4), "calc", 2),  # the model unsure of it
        ("Open receipts/may.csv and add up what I spent", -0.1, "", 2),  # the part far from what it does
        ("Open receipts/may.csv and tell me what is on it", -0.1, "calc", 2),  # the same: answered
        ("What does receipts/may.csv say about lunch?", -0.1, "calc", 1),  # nothing after the read
    ],
)
async def test_what_remains_is_answered_unless_a_tool_that_computes_is_near_it_and_sure(
    ask: str, score: float, favoured: str, payloads: int
) -> None:
    picks = [['calculator"']] if payloads == 2 else []  # the pick for what remains, when there is a remainder
    runtime = ScriptedRuntime(['read_file"'], *picks, ["It says 12.40."], score=score)
    embedder = FavouringEmbedder(favoured) if "add up" in ask else FavouringEmbedder("nothing")
    messages = _turn(ask, SPENT)
    response, _ = await run(runtime, request(messages=messages, tools=[READ_FILE, SUM]), embedder)
    assert response.tool_calls is None and response.content == "It says 12.40."
    assert len(runtime.payloads) == payloads + 1


@pytest.mark.parametrize(
    ("ask", "decided_again"),
    [
        ("Open receipts/may.csv and tell me how much I spent in total", True),  # a quantity asked after the read
        ("打开 receipts/may.csv，一共花了多少钱？", True),
        ("Open receipts/may.csv and tell me what I bought", False),  # no quantity asked: the answer
    ],
)
async def test_a_quantity_asked_after_a_read_and_answered_uncomputed_is_decided_on_its_own(
    ask: str, decided_again: bool
) -> None:
    picks = [['calculator"'], ['{"plan": "sum", "expression": "4.75 + 12.40"}']] if decided_again else []
    runtime = ScriptedRuntime(['answer"'], *picks, ["You bought coffee and lunch."])
    response, _ = await run(
        runtime, request(messages=_turn(ask, SPENT), tools=[READ_FILE, SUM]), FavouringEmbedder("calc")
    )
    if decided_again:
        assert response.tool_calls and response.tool_calls[0].args == {"expression": "4.75 + 12.40"}
        assert runtime.payloads[1]["regex"] == lt.choice_regex(["calculator"])
    else:
        assert response.tool_calls is None and len(runtime.payloads) == 2
    assert lt.asks_a_quantity("每人要出多少？") and not lt.asks_a_quantity("what did I buy?")


async def test_a_quantity_asked_of_results_is_near_enough_to_the_tool_that_computes() -> None:
    """A Chinese part far from the calculator's English summary by the cosine: its quantity makes it near."""
    runtime = ScriptedRuntime(['read_file"'], ['calculator"'], ['{"plan": "sum", "expression": "4.75 + 12.40"}'])
    messages = _turn("打开 receipts/may.csv，一共花了多少？", SPENT)
    response, _ = await run(runtime, request(messages=messages, tools=[READ_FILE, SUM]), FavouringEmbedder("nothing"))
    assert response.tool_calls and response.tool_calls[0].args == {"expression": "4.75 + 12.40"}


async def test_what_remains_is_not_computed_from_results_without_numbers() -> None:
    words = ("read_file", {"path": "notes/list.md"}, True, "- eggs\n- milk")
    messages = _turn("Read notes/list.md and add up the items", words)
    runtime = ScriptedRuntime(['read_file"'], ["Two items."])
    response, _ = await run(runtime, request(messages=messages, tools=[READ_FILE, SUM]), FavouringEmbedder("calc"))
    assert response.tool_calls is None and len(runtime.payloads) == 2


@pytest.mark.parametrize(
    ("value", "made"),
    [("4", ["expression"]), (" -2.5 ", ["expression"]), ("H2O", ["expression"]), ("1,000,000", ["expression"]),
     ("2 + 2", []), ("10 - 2", []), ("sqrt(2)", []), ("-3 ** 2", []), ("5!", [])],
)  # fmt: skip
def test_one_value_for_a_formula_is_an_answer_written_into_the_call(value: str, made: list[str]) -> None:
    """ "How many moons does Mars have?" offered a calculator → ``expression: "4"``, "水的化学式是什么？" → "H2O":
    nothing computed."""
    declared = defs(SUM)[0].parameters.model_dump(mode="json", exclude_none=True)
    messages = request(messages=_asking("How many moons does Mars have? Or 2 + 2?")).messages
    assert lt.made_up({"expression": value}, declared, messages) == made


@pytest.mark.parametrize(
    ("ask", "clause"),
    [
        ("打开 装修/报价 单.md，把各项加起来，再看看比8万的预算超了多少", "打开 装修/报价 单.md"),
        ("Read lines 10 to 20 of app.log and count the errors over 3", "Read lines 10 to 20 of app.log "),
        ("Add 1,250 and 3, then open x.md.", " open x.md"),
        ("What is 2 + 2?", "What is 2 + 2?"),  # no file named: the whole request
    ],
)
def test_the_clause_that_names_a_file(ask: str, clause: str) -> None:
    assert lt.clause_of(ask, ["装修/报价 单.md", "app.log", "x.md"]) == clause


async def test_a_call_on_a_named_file_takes_its_optional_numbers_from_the_clause_that_names_it() -> None:
    lines = {**READ_FILE, "parameters": {"type": "object", "required": ["path"], "properties": {
        "path": {"type": "string", "description": "Relative path."},
        "start_line": {"type": "number", "description": "First line to read."}}}}  # fmt: skip
    ask = "Open costs/list.md from line 3, then check how far over the 80000 budget it goes"
    runtime = ScriptedRuntime(['read_file"'], ['{"path": "costs/list.md", "start_line": 3}'])
    response, _ = await run(runtime, request(messages=_asking(ask), tools=[lines, CALC]))
    assert response.tool_calls and response.tool_calls[0].args == {"path": "costs/list.md", "start_line": 3}
    assert runtime.payloads[1]["json_schema"]["properties"]["start_line"] == {"type": "number", "enum": [3]}


@pytest.mark.parametrize(
    ("ask", "folder_tools"),
    [("帮我看下 待办 这个文件，还有什么没做？", False), ("Show me the file Makefile", False),
     ("Open the Makefile", False),  # a conventional file name (FILE_NAMES) is a file
     ("Open the Makefile in the build folder", True)],  # a folder named too: the folder tools may be meant
)  # fmt: skip
def test_a_name_the_request_calls_a_file_is_not_offered_to_the_folder_tools(ask: str, folder_tools: bool) -> None:
    lister = {**tool("list_directory", "path"), "description": "List a workspace folder."}
    offered = lt.named_file_tools(defs(READ_FILE, lister), request(messages=_asking(ask)).messages)
    assert ("list_directory" in [t.name for t in offered]) is folder_tools


GET = {
    **tool("http_get", "url"),
    "description": "Send a GET request to a URL.",
    "parameters": {"type": "object", "required": ["url"], "properties": {
        "url": {"type": "string", "description": "The address."},
        "params": {"type": "object", "description": "Query parameters."}}},
}  # fmt: skip


@pytest.mark.parametrize(
    ("ask", "args", "described", "made"),
    [
        ("What's the weather like in Paris?", {"url": "https://api.weather-now.io/v2/current?q=Paris"}, "", ["url"]),
        ("Fetch https://www.peps.python.org/pep-0008/ for me", {"url": "https://peps.python.org/pep-0008/"}, "", []),
        ("What's the weather like in Paris?", {"url": "https://api.weather-now.io/v2?q=Paris"},
         "Weather from https://api.weather-now.io.", []),  # the tool's description gives it
        ("把 https://example.cn/a 这个页面抓下来", {"url": "https://example.cn/a", "params": {"n": "https://m.up/x"}},
         "", ["params"]),  # an optional argument, nested
        ("Fetch example.cn/a and follow its next link", {"url": "https://example.cn/a"}, "", []),
        ("Send the report to my landlord's email", {"url": "https://mail.example.cn", "params": {
            "to": "landlord@landlord.com"}}, "Mail through https://mail.example.cn.", ["params"]),
        ("Mail Ana.Lee@Firm.example the notes", {"url": "https://mail.example.cn", "params": {
            "to": "ana.lee@firm.example"}}, "Mail through https://mail.example.cn.", []),  # as written, any case
    ],
)  # fmt: skip
def test_a_web_address_nothing_wrote_is_made_up(
    ask: str, args: dict[str, Any], described: str, made: list[str]
) -> None:
    declared = defs(GET)[0].parameters.model_dump(mode="json", exclude_none=True)
    messages = request(messages=_asking(ask)).messages
    assert lt.made_up(args, declared, messages, described) == made


async def test_a_call_to_a_web_address_the_tool_describes_is_made() -> None:
    described = {**GET, "description": "Send a GET request to https://api.weather-now.io and return the JSON."}
    url = "https://api.weather-now.io/v2?q=Paris"
    for offered, called in ((GET, False), (described, True)):
        runtime = ScriptedRuntime(['http_get"'], ['{"url": "' + url + '"}'], ["I cannot tell."])
        asked = request(messages=_asking("What's the weather like in Paris?"), tools=[offered])
        response, _ = await run(runtime, asked)
        assert bool(response.tool_calls) is called


@pytest.mark.parametrize(
    ("ask", "args", "made"),
    [
        ("Add the db server at db.example.org as admin", {"host": "db.example.org", "password": "admin123"},
         ["password"]),
        ("Log me in as kim, password Tr0ub4dor", {"host": "kim", "password": "Tr0ub4dor"}, []),
        ("Connect with API key AbC-123", {"host": "x", "api_key": "abc-123"}, []),  # as written, another case
    ],
)  # fmt: skip
def test_a_password_or_key_nobody_gave_is_made_up(ask: str, args: dict[str, Any], made: list[str]) -> None:
    server = {**tool("add_server", "host"), "parameters": {"type": "object", "required": ["host"], "properties": {
        "host": {"type": "string", "description": "Host."}, "password": {"type": "string", "description": "Secret."},
        "api_key": {"type": "string", "description": "Key."}}}}  # fmt: skip
    declared = defs(server)[0].parameters.model_dump(mode="json", exclude_none=True)
    assert lt.made_up(args, declared, request(messages=_asking(ask)).messages) == made


@pytest.mark.parametrize(
    ("formula", "kept"),
    [("4.75 + 12.40 + 1250", True), ("(4.75 + 12.40) / 2", True), ("5 * 3 + 2 / 4", False), ("4.75 * 100 * 7", False),
     ("1 + 2 + 3", False),  # single digits the data holds ("[1] … [3]") tell nothing of where they came from
     ("0.75 + 4.12", False)],  # decimals are read whole: not the 75 and the 12 of the data
)  # fmt: skip
def test_a_formula_for_what_remains_takes_its_numbers_from_the_data(formula: str, kept: bool) -> None:
    declared = defs(SUM)[0].parameters.model_dump(mode="json", exclude_none=True)
    data = "add them up\n\n3 rows: [1] coffee,4.75 [2] lunch,12.40 [3] rent,1,250"
    assert lt.from_the_data({"expression": formula}, declared, data) is kept


async def test_a_formula_for_what_remains_of_numbers_the_data_never_holds_is_not_called() -> None:
    found = ("knowledge_search", {"query": "router address"}, True, "[1] Home network: the router is at 192.168.31.1")
    messages = _turn("What's the router address again, router address? I think it is in my notes", found)
    runtime = ScriptedRuntime(['knowledge_search"'], ['calculator"'], ['{"plan": "x", "expression": "5 * 3 + 2 / 4"}'],
                              ["It is 192.168.31.1."])  # fmt: skip
    response, _ = await run(runtime, request(messages=messages, tools=[NOTES, SUM]), FavouringEmbedder("calc"))
    assert response.tool_calls is None and response.content == "It is 192.168.31.1."


def test_a_table_of_decimals_is_read_a_number_a_cell() -> None:
    """``300.10,280.50`` is two cells, not one number: the formula of a CSV's values comes from the data."""
    declared = defs(SUM)[0].parameters.model_dump(mode="json", exclude_none=True)
    data = "add up the quarter\n\ncategory,jul,aug\nrent,1000.00,1000.00\nfood,300.10,280.50"
    assert lt.from_the_data({"expression": "1000.00 + 1000.00 + 300.10 + 280.50"}, declared, data)


@pytest.mark.parametrize(
    ("ask", "swapped"),
    [
        ("My rent is $1,450 a month and I put 15% aside. How much is that a year?", True),
        ("我每月工资9000，房租占30%，一年房租一共多少钱？", True),
        ("What did I write about the 2 offers, 450 and 520 a day?", False),  # no quantity asked: the notes are
        ("In my notes from 2023, how much did I pay on 14 March?", False),  # a year and a date: no amounts
        ("How much did the 3 of us spend in Lisbon?", False),  # one amount: the rest is to be looked up
    ],
)  # fmt: skip
def test_an_unsure_pick_gives_way_to_a_nearer_tool_that_computes_when_the_request_gives_its_amounts(
    ask: str, swapped: bool
) -> None:
    from sidecar.agent.tools.builtin import default_registry

    tools = default_registry().definitions(["knowledge_search", "calculator"])
    unsure, sure = math.log(lt.NEARER_P) - 0.01, math.log(lt.NEARER_P)
    near = {"knowledge_search": 0.03, "calculator": 0.12}
    assert lt.computes_instead("knowledge_search", tools, near, unsure, ask) == ("calculator" if swapped else None)
    assert lt.computes_instead("knowledge_search", tools, near, sure, ask) is None  # the model sure of its own
    farther = {"knowledge_search": 0.2, "calculator": 0.12}
    assert lt.computes_instead("knowledge_search", tools, farther, unsure, ask) is None
    assert lt.computes_instead("calculator", tools, near, unsure, ask) is None


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        ("487 / 3 = 162.33", "487 / 3"),  # the model's own result, cut
        ("round(487 / 3, 2) = 162.33", "round(487 / 3, 2)"),
        ("pi * 7.5 ** 2 = 176.71", "pi * 7.5 ** 2"),
        ("2 * x = 8", "2 * x = 8"),  # an unknown: an equation, kept
        ("3 >= 2", "3 >= 2"),
        ("5 == 5", "5 == 5"),
        ("(3 + 4) * 2", "(3 + 4) * 2"),
    ],
)
def test_a_formula_written_with_its_value_is_cut_before_it(written: str, kept: str) -> None:
    from sidecar.agent.tools.builtin import default_registry

    (calculator,) = default_registry().definitions(["calculator"])
    declared = calculator.parameters.model_dump(mode="json", exclude_none=True)
    assert lt.without_its_value({"expression": written}, declared) == {"expression": kept}
    solver = {
        "type": "object",
        "properties": {"equation": {"type": "string", "description": "An equation, e.g. 2 + 2 = 4"}},
    }
    assert lt.without_its_value({"equation": "2 + 2 = 4"}, solver) == {"equation": "2 + 2 = 4"}


async def test_a_chinese_request_that_gives_its_amounts_is_computed_where_the_model_picked_the_notes() -> None:
    """The cross-language cosine leaves the calculator under the relevance bar (0.12) and the model's notes search
    farther still: the computing tool the request's amounts call for counts as near enough."""
    from sidecar.agent.tools.builtin import default_registry

    (calculator,) = default_registry().definitions(["calculator"])

    class Weak(FavouringEmbedder):
        def embed(self, texts: list[str]) -> np.ndarray:
            def at(c: float) -> list[float]:
                return [c, math.sqrt(1 - c * c)]

            return np.array([[1.0, 0.0] if i == 0 else at(0.12 if t.startswith("calculator") else 0.03)
                             for i, t in enumerate(texts)])  # fmt: skip

    unsure = math.log(lt.RELEVANT_P) - 0.1
    ask = "我每月工资9000，房租占30%，一年房租一共多少钱？"
    runtime = ScriptedRuntime(['notes_search"'], ['{"expression": "9000 * 12 * 30%"}'], score=unsure)
    tools = [NOTES_SEARCH, calculator.model_dump(mode="json", exclude_none=True)]
    response, _ = await run(runtime, request(messages=_asking(ask), tools=tools), Weak())
    computed = [("calculator", {"expression": "9000 * 12 * 0.3"})]  # a stated percentage multiplied by: its fraction
    assert [(c.name, c.args) for c in response.tool_calls or ()] == computed
    runtime = ScriptedRuntime(['notes_search"'], ['{"query": "报价 450 520"}'], score=unsure)
    asked = request(messages=_asking("我的笔记里写的那两个报价，450 和 520，是哪家的？"), tools=tools)
    response, _ = await run(runtime, asked, Weak())
    assert [c.name for c in response.tool_calls or ()] == ["notes_search"]  # no quantity asked: the notes it names
    runtime = ScriptedRuntime(['calculator"'], ['{"expression": "9000 * 12 * 30%"}'], score=unsure)
    response, _ = await run(runtime, request(messages=_asking(ask), tools=tools), Weak())  # its own pick: near too
    assert [(c.name, c.args) for c in response.tool_calls or ()] == computed
    assert lt.arithmetic(ask) and not lt.arithmetic("我的笔记里写的那两个报价，450 和 520，是哪家的？")


def test_names_and_folders_are_found_deep_in_a_long_request() -> None:
    """A pasted page before the request proper: the same names as without it (read in linear time; the folder
    pattern and the look back for a spaced name had scanned from every character)."""
    page = "这是一段很长的粘贴文字没有空格" * 400 + " " + "and some words " * 200
    assert lt.named_paths(page + "then read reports/May sales.csv") == ["reports/May sales.csv"]
    assert lt.named_paths(page + "save it to a file called tax estimate.txt") == ["tax estimate.txt"]
    assert lt.named_folder(page + "，然后在 日记 文件夹里建一个 a.md") == "日记"
    assert lt.named_folder(page) is None


def test_a_search_of_the_users_own_things_is_known_by_its_description() -> None:
    """What is searched is the user's own, named as what the search looks in (not what it fits)."""
    from sidecar.agent.tools.builtin import default_registry

    builtin = default_registry().definitions(default_registry().names())
    assert [t.name for t in builtin if lt.searches_the_users(t)] == ["knowledge_search"]
    own = defs(NOTES_SEARCH, {**tool("calendar_query", "query"),
                              "description": "Searches a user's calendar for events that match a query."},
               {**tool("mail_find", "query"), "description": "Find the messages in your mailbox that mention a text."},
               {**tool("events", "query"), "description": "Search for events within a user's calendar."})  # fmt: skip
    assert all(lt.searches_the_users(t) for t in own)
    other = defs({**tool("movies", "genre"), "description": "Search for movies that fit a user's preferences."},
                 {**tool("profile", "token"), "description": "Retrieves a user's profile."}, FIND)  # fmt: skip
    assert not any(lt.searches_the_users(t) for t in other)


@pytest.mark.parametrize(
    ("text", "theirs"),
    [("According to my notes, how often should I feed it?", True), ("What did we decide on the budget?", True),
     ("I'm sure it was in there", True), ("客房的 Wi-Fi 密码是多少？我笔记里应该有。", True),
     ("咱家宽带账号是啥", True),
     ("Who wrote Pride and Prejudice?", False), ("《红楼梦》的作者是谁？", False),
     ("把“我明天下午三点有空”翻译成英文。", False), ('How do I say "I am lost" in French?', False),
     ("《我的前半生》是谁写的？", False), ("What's the iPhone's screen size?", False),
     ("How can I fix my bike chain?", True), ("帮我把这句话改得委婉一点：“你什么时候还钱？”", False),
     ("help me write a poem about rain", False), ("Can you help me write a note to my landlord?", True),
     ("帮我查一下我的笔记", True)],
)  # fmt: skip
def test_a_request_speaks_of_the_user_outside_what_it_quotes(text: str, theirs: bool) -> None:
    assert lt.speaks_of_the_user(text) is theirs


async def test_a_question_of_general_knowledge_is_answered_not_looked_up_in_the_users_notes() -> None:
    """The model picks the notes search for "Who wrote Pride and Prejudice?" (p 0.95 measured): a request that speaks
    neither of the user nor of the notes, among other tools, is answered; one that speaks of the user, or of the
    notes, or a notes search offered alone, is the search's."""
    sure = -0.05
    tools = [NOTES_SEARCH, CALC]
    for ask in ("Who wrote Pride and Prejudice?", "《红楼梦》的作者是谁？"):
        runtime = ScriptedRuntime(['notes_search"'], ['general"'], ["He was"], score=sure)
        response, _ = await run(runtime, request(messages=_asking(ask), tools=tools))
        assert not response.tool_calls and response.content == "He was"
        assert len(runtime.payloads) == 3 and "json_schema" not in runtime.payloads[2]  # no arguments written
        opinion = runtime.payloads[1]
        assert opinion["messages"][0]["content"] == lt.KNOWLEDGE_PROMPT and opinion["messages"][1]["content"] == ask
    runtime = ScriptedRuntime(['notes_search"'], ['personal"'], ['{"query": "Leo swimming coach"}'], score=sure)
    response, _ = await run(runtime, request(messages=_asking("Who's Leo's swimming coach?"), tools=tools))
    assert [c.name for c in response.tool_calls or ()] == ["notes_search"]  # the second opinion: the user's own
    for ask in ("Who wrote the book I liked last week?", "What do the notes say about the launch?"):
        runtime = ScriptedRuntime(['notes_search"'], ['{"query": "book"}'], score=sure)
        response, _ = await run(runtime, request(messages=_asking(ask), tools=tools))
        assert [c.name for c in response.tool_calls or ()] == ["notes_search"]
    runtime = ScriptedRuntime(['notes_search"'], ['{"query": "warranty"}'], score=sure)
    alone = request(messages=_asking("How long is the warranty of the Metona?"), tools=[NOTES_SEARCH])
    response, _ = await run(runtime, alone)
    assert [c.name for c in response.tool_calls or ()] == ["notes_search"]  # the host offered it alone
    named = {name: set() for name in ("notes_search", "calculator")}
    (search,) = defs(NOTES_SEARCH)
    assert lt.not_the_users(search, named["notes_search"], "How long is the warranty of the Metona?", 2)
    assert not lt.not_the_users(search, named["notes_search"], "How long is the warranty of the Metona X1?", 2)


async def test_a_second_look_does_not_send_a_general_question_to_the_users_notes() -> None:
    """An ``answer`` whose second look names the notes search by a wide margin stays an answer for a question of
    general knowledge; asked of the user's notes, the search is made."""
    runtime = ScriptedRuntime(['answer"'], ['notes_search"'], ['general"'], ["Canberra."], score=-0.05)
    tools = [NOTES_SEARCH, CALC]
    worth = FavouringEmbedder("notes search")
    response, _ = await run(runtime, request(messages=_asking("What is the capital of Australia?"), tools=tools), worth)
    assert not response.tool_calls and response.content == "Canberra."


async def test_my_notes_name_the_notes_search_for_an_unsure_pick_of_another_tool() -> None:
    """ "翻翻我的笔记，…" went to list_directory at p 0.44: one word of the notes search ("笔记", note) and the user's
    own is enough for it to give way; without the user, one word is not."""
    unsure = math.log(lt.NEARER_P) - 0.4
    lister = {**tool("list_folder", "path"), "description": "List a folder."}
    tools = [lister, NOTES_SEARCH]
    runtime = ScriptedRuntime(['list_folder"'], ['{"query": "京都 第二天"}'], score=unsure)
    ask = "翻翻我的笔记，京都那次旅行第二天是怎么安排的？"
    response, _ = await run(runtime, request(messages=_asking(ask), tools=tools), FavouringEmbedder("list folder"))
    assert [(c.name, c.args) for c in response.tool_calls or ()] == [("notes_search", {"query": "京都 第二天"})]
    assert lt.spoken_of_as_theirs(defs(*tools), ask) == {"notes_search"}
    assert lt.spoken_of_as_theirs(defs(*tools), "笔记软件有哪些推荐？") == set()


async def test_a_fact_asked_again_is_looked_up_in_the_users_things_when_the_second_opinion_agrees() -> None:
    """ "What's the office printer's IP again?" went to the time tool at p 0.74 and "咱家那只巴西龟…几度…？" to the
    notes search far from the request (answered from memory): a fact the user asks after as one they knew once, or
    of their own life, is looked up in their things when the second opinion says personal; a general fact asked
    "again" is answered. The second opinion is asked once a step."""
    unsure = math.log(lt.NEARER_P) - 0.4
    tools = [TIME, NOTES_SEARCH]
    printer = "what's the office printer's IP again?"
    runtime = ScriptedRuntime(['get_current_time"'], ['personal"'], ['{"query": "office printer IP"}'], score=unsure)
    response, _ = await run(runtime, request(messages=_asking(printer), tools=tools), FavouringEmbedder("get"))
    assert [c.name for c in response.tool_calls or ()] == ["notes_search"]
    assert [p["messages"][0]["content"] for p in runtime.payloads].count(lt.KNOWLEDGE_PROMPT) == 1
    capital = "What's the capital of Australia again?"
    runtime = ScriptedRuntime(['get_current_time"'], ['general"'], ["Canberra."], score=unsure)
    response, _ = await run(runtime, request(messages=_asking(capital), tools=tools), FavouringEmbedder("get"))
    assert "notes_search" not in [c.name for c in response.tool_calls or ()]
    far = math.log(lt.RELEVANT_P) - 0.3  # under the relevance bar, and the embedder ranks the time tool nearer
    turtle = "咱家那只巴西龟，冬天水温低于几度就别喂了？"
    runtime = ScriptedRuntime(['notes_search"'], ['personal"'], ['{"query": "巴西龟 水温"}'], score=far)
    response, _ = await run(runtime, request(messages=_asking(turtle), tools=tools), FavouringEmbedder("get"))
    assert [(c.name, c.args) for c in response.tool_calls or ()] == [("notes_search", {"query": "巴西龟 水温"})]
    runtime = ScriptedRuntime(['notes_search"'], ['general"'], ["十五度。"], score=far)
    response, _ = await run(runtime, request(messages=_asking(turtle), tools=tools), FavouringEmbedder("get"))
    assert response.tool_calls is None
    assert lt.recalls(printer) and lt.recalls("老王的生日是几号来着？") and lt.recalls("上次那个牙医诊所的电话是多少？")
    assert not lt.recalls("Play it again and again") and not lt.recalls("翻译“我忘了带钥匙”")  # not asked; quoted
    assert lt.asks_their_own(printer) and lt.asks_their_own(turtle)
    assert not lt.asks_their_own("What time is it now, again?")  # the present moment: no record holds it
    assert not lt.speaks_of_the_user("remind me, who wrote Pride and Prejudice?")  # how it asks, not of whom
    assert lt.speaks_of_the_user("remind me where my passport is?")


async def test_a_fact_of_the_users_own_life_is_looked_up_not_computed() -> None:
    """A question after a setting the user once noted down went to the calculator at p 0.37-0.59 with its numbers
    made up, then was answered from memory: asked of the user's own life with no amount, no file and not of the
    present moment, an unsure pick that searches nothing of the user's gives way to the one tool that does."""
    unsure = math.log(lt.NEARER_P) - 0.4
    tools = [CALC, NOTES_SEARCH]
    for ask in ("What pressure should my boiler sit at? I noted it somewhere.", "上回我炒火锅底料，花椒放了多少克？"):
        runtime = ScriptedRuntime(['calculator"'], ['personal"'], ['{"query": "boiler pressure"}'], score=unsure)
        response, _ = await run(runtime, request(messages=_asking(ask), tools=tools), FavouringEmbedder("calculator"))
        assert [c.name for c in response.tool_calls or ()] == ["notes_search"], ask
        assert runtime.payloads[1]["messages"][0]["content"] == lt.KNOWLEDGE_PROMPT
    general = "What's the capital of Peru? I never remember it."  # "I" in passing: the second opinion says general
    runtime = ScriptedRuntime(['calculator"'], ['general"'], ['{"expression": "1 + 1"}'], ["Lima."], score=unsure)
    response, _ = await run(runtime, request(messages=_asking(general), tools=tools), FavouringEmbedder("calculator"))
    assert "notes_search" not in [c.name for c in response.tool_calls or ()]
    assert runtime.payloads[1]["messages"][0]["content"] == lt.KNOWLEDGE_PROMPT
    (calc, search) = defs(*tools)
    own = "What exposure time did I use for my night shots?"
    assert lt.of_their_own(calc, set(), [calc, search], unsure, own) == "notes_search"
    assert lt.of_their_own(calc, set(), [calc, search], -0.01, own) is None  # the model is sure of its pick
    assert lt.of_their_own(calc, {"calculate"}, [calc, search], unsure, own) is None  # the request names the pick
    assert lt.of_their_own(calc, set(), [calc], unsure, own) is None  # nothing searches the user's things
    for other in (
        "What did I pay per month if I paid 1,200 over 12 months?",  # amounts of its own
        "Which of my files has the exposure times?",  # a file
        "What time is it for me right now?",  # the present
        "What exposure time should night shots use?",  # nobody's own
        "Tell me about exposure times I could use.",  # no one fact asked
    ):
        assert lt.of_their_own(calc, set(), [calc, search], unsure, other) is None, other


async def test_a_formula_of_no_number_the_request_states_is_not_computed() -> None:
    """A request with no number of its own picked the calculator, surely, with a made-up formula or a bare number:
    answered; when the request speaks of the user's own things, their search is called instead."""
    formula = {"expression": {"type": "string", "description": "A formula, e.g. '(3 + 4) * 2 ** 10 / sqrt(2)'"}}
    calculator = {**CALC, "parameters": {"type": "object", "required": ["expression"], "properties": formula}}
    tools = [calculator, NOTES_SEARCH]
    for ask in ("How many teaspoons in a tablespoon?", "一斤等于多少克？"):
        runtime = ScriptedRuntime(['calculator"'], ["Three."])
        response, _ = await run(runtime, request(messages=_asking(ask), tools=tools), FavouringEmbedder("calculator"))
        assert response.tool_calls is None and response.content == "Three.", ask
        assert len(runtime.payloads) == 2  # the decision, then the answer: no arguments written
    mine = "翻下我笔记，羽毛球场地费一小时多少钱？"
    runtime = ScriptedRuntime(['calculator"'], ['{"query": "羽毛球场地费"}'])
    response, _ = await run(runtime, request(messages=_asking(mine), tools=tools), FavouringEmbedder("calculator"))
    assert [(c.name, c.args) for c in response.tool_calls or ()] == [("notes_search", {"query": "羽毛球场地费"})]
    (calc, search) = defs(*tools)

    def said(*texts: str) -> Any:
        turns = [{"role": r, "content": t, "timestamp": 1} for r, t in zip(["user", "assistant"] * 3, texts)]
        return request(messages=turns).messages

    assert lt.nothing_to_compute(calc, said("How many teaspoons in a tablespoon?"))
    assert not lt.nothing_to_compute(calc, said("What is two plus three?"))  # numbers in words are stated
    assert not lt.nothing_to_compute(search, said("How many teaspoons in a tablespoon?"))  # computes nothing
    assert not lt.nothing_to_compute(calc, said("Prices: 3.50, 4.20, 9.99", "Noted.", "Add them up."))  # earlier


async def test_a_folder_the_request_names_makes_a_folder_tool_near_enough() -> None:
    """ "列一下 学习/雅思/听力 这个文件夹里都有啥" named list_directory at p 0.37, far from it by the embedder
    (Chinese against an English summary): answered with a made-up listing. A folder named, a tool that works in
    folders is near enough; a tool that does not is judged as before."""
    unsure = math.log(0.37)
    lister = {
        **tool("list_directory", "path"),
        "description": "List the files and folders in a folder of the workspace.",
    }
    ask = "列一下 学习/雅思/听力 这个文件夹里都有啥"
    runtime = ScriptedRuntime(['list_directory"'], ['{"path": "学习/雅思/听力"}'], score=unsure)
    response, _ = await run(runtime, request(messages=_asking(ask), tools=[lister, CALC]), FavouringEmbedder("calc"))
    assert [(c.name, c.args) for c in response.tool_calls or ()] == [("list_directory", {"path": "学习/雅思/听力"})]
    runtime = ScriptedRuntime(['list_directory"'], ["宫保鸡丁、番茄炒蛋。"], score=unsure)
    ask = "列一下你会做的家常菜"  # no folder named: unsure and far, answered as before
    response, _ = await run(runtime, request(messages=_asking(ask), tools=[lister, CALC]), FavouringEmbedder("calc"))
    assert response.tool_calls is None and response.content == "宫保鸡丁、番茄炒蛋。"


@pytest.mark.parametrize(
    ("text", "fact"),
    [("What's the capital of Australia? I always mix it up with Sydney.", True), ("一个小时等于多少秒来着？", True),
     ('How do I say "Where is the train station?" in French?', True), ("“请问这个座位有人吗？”用日语怎么说？", True),
     ("《红楼梦》的作者是谁？", True), ("How many days are there in a leap year?", True),
     ("Markdown 里怎么写一个两列的表格？", False), ("最近老是失眠，你有什么睡前放松的小建议吗？", False),
     ("Explain what a hash table is?", False), ("Why is the sky blue?", False), ("帮我写一首关于秋天的诗。", False),
     ("Good morning! I finally finished my thesis.", False), ('把“谁在那里？”翻译成英文。', False),
     ("What is " + "very " * 40 + "long?", False)],
)  # fmt: skip
def test_a_question_of_one_fact_is_known_from_one_that_asks_for_writing(text: str, fact: bool) -> None:
    assert lt.asks_a_fact(text) is fact


@pytest.mark.parametrize(("installed", "slot"), [(True, "arguments"), (False, None)])
async def test_a_fact_asked_without_tools_is_answered_by_the_larger_model(
    monkeypatch: pytest.MonkeyPatch, installed: bool, slot: str | None
) -> None:
    """The 0.5B model answered "What's the capital of Australia?" with Sydney: a question of one fact the decision
    answers is written by the 1.5B model where it writes arguments; a request to write something stays on the
    deciding model."""
    from sidecar.localmodel import assets

    monkeypatch.setattr(assets, "arguments_status", lambda: (installed, None if installed else "missing"))
    monkeypatch.setattr(assets, "physical_memory", lambda: 16 * GIB)
    runtime = ScriptedRuntime(['answer"'], ['calculator"'], ["Canberra."], score=-0.05)
    ask = _asking("What's the capital of Australia?")
    response, _ = await run(runtime, request(messages=ask, tools=[CALC, TIME]))
    assert response.content == "Canberra."
    assert [p.get("slot") for p in runtime.payloads] == [None, None, slot]
    runtime = ScriptedRuntime(['answer"'], ['calculator"'], ["Leaves fall."], score=-0.05)
    await run(runtime, request(messages=_asking("Write a haiku about autumn."), tools=[CALC, TIME]))
    assert [p.get("slot") for p in runtime.payloads] == [None, None, None]


async def test_a_file_due_after_a_result_is_offered_the_tools_its_clause_asks_for() -> None:
    """After the read of todo.md, pending.md is due: its clause asks it saved, so only the tools that change
    things are offered (the 0.5B model read pending.md at p 0.99); a clause that asks nothing changed offers the
    others."""
    ask = "读一下 todo.md，把没做完的事情单独存到 pending.md 里"
    read = ("read_file", {"path": "todo.md"}, True, "- [ ] 买牛奶\n- [x] 交房租")
    runtime = ScriptedRuntime(['write_file"'], ["- [ ] 买牛奶"], ['{"path": "pending.md", "size": 12}'])
    response, _ = await run(runtime, request(messages=_turn(ask, read), tools=[READ_FILE, PERMITTED_WRITE]))
    assert runtime.payloads[0]["regex"] == lt.choice_regex(["write_file"], answer=False)
    assert [(c.name, c.args["path"]) for c in response.tool_calls or ()] == [("write_file", "pending.md")]
    tools = defs(READ_FILE, PERMITTED_WRITE)
    then_read = "Save the total to total.txt, then read notes.txt"
    assert [t.name for t in lt.as_the_clause_asks(tools, then_read, ["notes.txt"])] == ["read_file"]
    assert [t.name for t in lt.as_the_clause_asks(tools, then_read, ["total.txt"])] == ["write_file"]
    assert [t.name for t in lt.as_the_clause_asks(defs(READ_FILE), then_read, ["total.txt"])] == ["read_file"]


async def test_a_detail_asked_of_a_file_the_results_named_is_read_from_it() -> None:
    """ "Find the file that mentions … and tell me what time it is at": the search's matched line does not hold it,
    so the found file is read next; a file a listing named is read when the request names it by a word; not for
    what was found, what a folder holds, which file or how many."""
    matches = {"path": ".", "matches": [{"path": "notes/health.md", "kind": "content", "line": 4}]}
    found = ("search_files", {"query": "dentist"}, True, matches)
    ask = "Find the file that mentions the dentist appointment and tell me what time it is at"
    runtime = ScriptedRuntime(['read_file"'], ['{"path": "notes/health.md"}'], score=math.log(0.2))
    response, _ = await run(runtime, request(messages=_turn(ask, found), tools=[FIND, READ_FILE]))
    assert [(c.name, c.args) for c in response.tool_calls or ()] == [("read_file", {"path": "notes/health.md"})]
    assert runtime.payloads[0]["regex"] == lt.choice_regex(["read_file"], answer=False)
    listed = ["recipes/pancakes.md", "recipes/soup.md"]
    calls = [("list_directory", {"path": "recipes"})]
    assert lt.asked_of("List the recipes folder and tell me what's in the pancake one", calls, listed) == listed[:1]
    assert lt.asked_of("看看 报告 文件夹，第三季度那份的利润是多少", [("list_directory", {"path": "报告"})],
                       ["报告/第一季度.md", "报告/第三季度.md"]) == ["报告/第三季度.md"]  # fmt: skip
    for asked in (
        "List the recipes folder and tell me what's in it",
        "List recipes and tell me how many there are",
        "List recipes, then tell me which one is newest",
        "List the recipes folder and save it to r.txt",
    ):
        assert lt.asked_of(asked, calls, listed) == [], asked
    search = [("search_files", {"query": "invoice"})]
    assert lt.asked_of('Search for "invoice" and tell me what you find', search, ["a/inv.md"]) == []


async def test_a_number_no_calculation_has_used_is_computed_again_from_its_clause() -> None:
    """ "…, add up my hours for the week, and tell me what I'll get paid at $42.50 an hour": after the sum the
    model names the calculator again; the clause that states 42.50 is decided on its own and computed."""
    ask = "Open timesheet.csv, add up my hours for the week, and tell me what I'll get paid at $42.50 an hour."
    read = ("read_file", {"path": "timesheet.csv"}, True, "day,hours\nMon,7.5\nTue,31")
    summed = ("calculator", {"expression": "7.5 + 31"}, True, "7.5 + 31 = 38.5")
    runtime = ScriptedRuntime(['calculator"'], ['calculator"'], ['{"plan": "pay", "expression": "38.5 * 42.50"}'])
    response, _ = await run(runtime, request(messages=_turn(ask, read, summed), tools=[READ_FILE, SUM, TIME]))
    assert [(c.name, c.args) for c in response.tool_calls or ()] == [("calculator", {"expression": "38.5 * 42.50"})]
    assert "42.50" in runtime.payloads[1]["messages"][-1]["content"]
    assert "add up my hours" not in runtime.payloads[1]["messages"][-1]["content"]  # the clause of the number
    calls = [("read_file", {"path": "timesheet.csv"}), ("calculator", {"expression": "7.5 + 31"})]
    rest = lt.what_remains(ask, calls)
    assert rest is not None and lt.unused_numbers(rest, calls) == [42.5]
    assert lt.from_the_number(rest, [42.5]) == "tell me what I'll get paid at $42.50 an hour."
    assert lt.unused_numbers("add up the 7.5 and 31", calls) == []  # used already: nothing computed again
    runtime = ScriptedRuntime(['calculator"'], ["You get 38.5 hours."])  # no number left: answered
    response, _ = await run(runtime, request(messages=_turn("Open timesheet.csv and add up my hours", read, summed),
                                             tools=[READ_FILE, SUM, TIME]))  # fmt: skip
    assert response.tool_calls is None and len(runtime.payloads) == 2


def test_a_change_goes_to_the_file_whose_clause_asks_for_one() -> None:
    """Both files named: the write may be given only the one its clause saves to, never the one read from."""
    ask = "把 读书笔记/第三章.md 里用“>”开头标出来的句子挑出来，单独存到 金句.txt 里。"
    assert lt.to_change(["读书笔记/第三章.md", "金句.txt"], ask) == ["金句.txt"]
    assert lt.to_change(["a.txt", "b.txt"], "Compare a.txt with b.txt") == ["a.txt", "b.txt"]  # none asks: both
    ask = "Read groceries.txt and put only the urgent items into a new file called urgent.txt."
    assert lt.to_change(["groceries.txt", "urgent.txt"], ask) == ["urgent.txt"]
    ask = "把 播客/采访提纲.md 里打了★的问题单独抄到 追问清单.txt"  # copied to, gathered into, a line added
    assert lt.to_change(["播客/采访提纲.md", "追问清单.txt"], ask) == ["追问清单.txt"]
    assert lt.to_change(["车险.txt"], "把笔记里车险的信息整理到 车险.txt") == ["车险.txt"]
    assert lt.asks_for_a_change(request(messages=_asking("在 浇花记录.txt 最后加一行：龟背竹浇透了")).messages)
    assert not lt.asks_for_a_change(request(messages=_asking("浇花记录.txt 里最后一行写的什么？")).messages)
    assert lt.asks_for_a_change(request(messages=_asking("在 报销.xlsx 的 Sheet1 里给 C5 加个批注")).messages)
    assert lt.asks_for_a_change(request(messages=_asking("把 成绩单.xlsx 的 A1 到 E1 合并成一个单元格")).messages)
    for reading in ("今晚要加个班，先帮我看看 report.docx 里写了什么", "打开 10-K.pdf，看下合并资产负债表里的总资产"):
        assert not lt.asks_for_a_change(request(messages=_asking(reading)).messages), reading  # 加班, 合并报表


async def test_an_unsure_listing_for_a_quoted_text_to_find_is_decided_again_among_the_finders() -> None:
    """ "之前有个文件里写了“年会抽奖”的奖品安排…帮我找到它" went to list_directory at p 0.36 and was answered: a quoted
    text to find, a listing picked unsure, is decided again among the tools that find text; a folder's quoted name,
    or a sure pick, is kept."""
    from sidecar.agent.tools.builtin import default_registry

    tools = [t.model_dump(mode="json", by_alias=True, exclude_none=True)
             for t in default_registry().definitions(["list_directory", "search_files"])]  # fmt: skip
    ask = "之前有个文件里写了“年会抽奖”的奖品安排，我忘了放在哪儿了。帮我找到它，看看一等奖是什么？"
    runtime = ScriptedRuntime(['list_directory"'], ['search_files"'], ['{"query": "年会抽奖"}'], score=math.log(0.36))
    response, _ = await run(runtime, request(messages=_asking(ask), tools=tools), FavouringEmbedder("search"))
    assert [(c.name, c.args["query"]) for c in response.tool_calls or ()] == [("search_files", "年会抽奖")]
    assert runtime.payloads[1]["regex"] == lt.choice_regex(["search_files"])
    assert lt.asked_of(ask, [("search_files", {"query": "年会抽奖"})], ["活动/年会.md"]) == ["活动/年会.md"]
    assert lt.quotes_a_text(ask) and not lt.quotes_a_text("看看「照片整理」文件夹里有什么")
    runtime = ScriptedRuntime(['list_directory"'], ['{"path": "."}'], score=math.log(0.9))  # sure: kept
    response, _ = await run(runtime, request(messages=_asking(ask), tools=tools), FavouringEmbedder("search"))
    assert [c.name for c in response.tool_calls or ()] == ["list_directory"]


async def test_a_read_picked_again_for_a_request_about_files_in_a_named_folder_lists_the_folder_first() -> None:
    """ "简历文件夹里我存了好几个版本，打开最新的那一版…": the notes search picked unsure, decided again among the file
    tools, went to read_file with no file to read; the folder named is listed first."""
    from sidecar.agent.tools.builtin import default_registry

    names = ["read_file", "list_directory", "search_files", "knowledge_search"]
    tools = [t.model_dump(mode="json", by_alias=True, exclude_none=True)
             for t in default_registry().definitions(names)]  # fmt: skip
    ask = "简历文件夹里我存了好几个版本，打开最新的那一版，告诉我里面期望薪资写的是多少。"
    runtime = ScriptedRuntime(['knowledge_search"'], ['read_file"'], ['{"path": "简历"}'], score=math.log(0.38))
    response, _ = await run(runtime, request(messages=_asking(ask), tools=tools))
    assert [(c.name, c.args["path"]) for c in response.tool_calls or ()] == [("list_directory", "简历")]
    assert runtime.payloads[2]["prefix"] == '{"tool": "list_directory", "arguments": '


def test_the_text_a_call_writes_is_its_one_required_free_string() -> None:
    """write_file's ``content``, a plugin's ``body``: a required string with no enum, no format, not a file's name,
    not bounded short, of a tool that changes things; none where there is not exactly one, or the tool reads."""
    assert lt.text_argument(defs(PERMITTED_WRITE)[0], lt.arguments_schema(PERMITTED_WRITE["parameters"])) == "content"
    ticket = {
        **tool("create_ticket", "title"),
        "description": "Open a ticket.",
        "parameters": {"type": "object", "required": ["title", "body", "project"], "properties": {
            "title": {"type": "string", "description": "One line. (string, at most 120 characters)"},
            "body": {"type": "string", "description": "What happened."},
            "project": {"type": "string", "description": "Key.", "enum": ["OPS", "WEB"]}}},
    }  # fmt: skip
    assert lt.text_argument(defs(ticket)[0], lt.arguments_schema(ticket["parameters"])) == "body"
    two = {**ticket, "parameters": {**ticket["parameters"], "properties": {
        **ticket["parameters"]["properties"], "title": {"type": "string", "description": "One line."}}}}  # fmt: skip
    assert lt.text_argument(defs(two)[0], lt.arguments_schema(two["parameters"])) is None  # which of the two?
    search = {**tool("search_notes", "query"), "description": "Search the notes."}
    assert lt.text_argument(defs(search)[0], lt.arguments_schema(search["parameters"])) is None  # it reads
    assert lt.without_argument({"properties": {"a": {}, "b": {}}, "required": ["a", "b"]}, "b") == {
        "properties": {"a": {}},
        "required": ["a"],
    }


@pytest.mark.parametrize(
    ("written", "text"),
    [
        ("# 车险\n- 保单号: PA2025-88317\n", "# 车险\n- 保单号: PA2025-88317"),
        ('write_file = """\n# 车险\n- 95511\n"""', "# 车险\n- 95511"),
        ("Sure, here is the text:\n\n```\nWiFi: Larkspur-5G\n```", "WiFi: Larkspur-5G"),
        ('```python\ncontent = """\nx\n"""\n```', "x"),
        ("Before\n```\nx\n```\nafter ```y```", "Before\n```\nx\n```\nafter ```y```"),  # not wholly wrapped
        ("  indented\n  list\n\n", "  indented\n  list"),
    ],
)
def test_the_written_text_loses_a_wrapping_not_its_own_form(written: str, text: str) -> None:
    assert lt.unfenced(written) == text


def test_the_text_written_in_its_fence_ends_at_the_fence_and_a_call_written_instead_gives_its_text() -> None:
    assert lt.fenced_text("- 买牛奶\n- 交房租\n```\n以上是待办。", "content") == "- 买牛奶\n- 交房租"
    assert lt.fenced_text('{"path": "待办.txt", "content": "- 买牛奶"}', "content") == "- 买牛奶"
    assert lt.fenced_text('write_file({"path": "a.txt", "content": "1. x\\n2. y"})', "content") == "1. x\n2. y"
    assert lt.fenced_text('{"path": "a.txt"}', "content") == '{"path": "a.txt"}'  # no text in it: as written
    assert lt.fenced_text("Set {width} to 3", "content") == "Set {width} to 3"
    assert lt.fenced_text("```\n- 买牛奶\n```", "content") == "- 买牛奶"  # the fence opened again


async def test_after_results_the_text_a_call_writes_is_written_first_as_the_answer_is() -> None:
    """ "Put … from my notes into wifi.txt": after the search, the content is asked for as text from the request
    and the results (the 1.5B model had copied the request into the JSON string), by the model that writes
    answers; the JSON arguments are then the rest, and the call carries the text."""
    ask = "Put the wifi details from my notes into wifi.txt"
    found = ("knowledge_search", {"query": "wifi"}, True, "[1] Home wifi: network Larkspur-5G")
    runtime = ScriptedRuntime(
        ['write_file"'], ["network Larkspur-5G\n```\nI wrote it."], ['{"path": "wifi.txt", "size": 17}'], score=-0.05
    )
    response, _ = await run(runtime, request(messages=_turn(ask, found), tools=[NOTES, PERMITTED_WRITE]))
    assert [(c.name, c.args) for c in response.tool_calls or ()] == [
        ("write_file", {"path": "wifi.txt", "size": 17, "content": "network Larkspur-5G"})
    ]
    _, text, arguments = runtime.payloads
    assert "json_schema" not in text and "tools" not in text and text["prefix"] == lt.TEXT_PREFIX
    asked = text["messages"][-1]["content"]
    assert asked.startswith(ask) and "Larkspur-5G" in asked
    assert asked.endswith(lt.text_request(defs(PERMITTED_WRITE)[0], "content", request(messages=_turn(ask)).messages))
    assert "content" not in arguments["json_schema"]["properties"]
    assert "content" not in arguments["json_schema"]["required"]


async def test_a_text_cut_short_is_no_call_and_the_user_is_told() -> None:
    ask = "把笔记里车险的信息整理到 车险.txt"
    found = ("knowledge_search", {"query": "车险"}, True, "[1] 平安车险，报案电话 95511")

    class Looping(ScriptedRuntime):
        async def generate(self, payload: dict[str, Any], on_delta: Any, *, model_path: str | None = None) -> dict:
            done = await super().generate(payload, on_delta, model_path=model_path)
            return {**done, "finish": "loop"} if len(self.payloads) == 2 else done

    runtime = Looping(['write_file"'], ["| a | a | a |"], ["车险已整理。"], score=-0.05)
    response, _ = await run(runtime, request(messages=_turn(ask, found), tools=[NOTES, PERMITTED_WRITE]))
    assert not response.tool_calls
    assert response.content.startswith(lt.cut_notice("write_file", "loop", request(messages=_turn(ask)).messages))


def test_what_a_line_to_write_spells_out_after_its_colon() -> None:
    watering = "在 浇花记录.txt 最后加一行：今天的日期，后面写“龟背竹浇透了”"
    assert lt.what_to_write(watering) == "今天的日期，后面写“龟背竹浇透了”"
    assert lt.what_to_write("Add to timelog.txt: the current time and 'started'") == "the current time and 'started'"
    assert lt.what_to_write("在 todo.txt 最后加一行：买牛奶") is None  # under four characters
    assert lt.what_to_write("Read notes.md: what is the wifi password?") is None  # no change asked
    assert lt.what_to_write("Add this line: buy more coffee beans") is None  # no file named before it


async def test_what_a_line_to_write_asks_for_is_decided_first_among_the_tools_that_change_nothing() -> None:
    """ "Add to timelog.txt: the current time and …": the named file had narrowed the decision to the file tools;
    the part after the colon is decided on its own first, without the tools that change things, and the time is
    asked for; when that part calls nothing, the whole request is decided as before."""
    ask = 'Add to timelog.txt: the current time and "started the report"'
    runtime = ScriptedRuntime(['get_current_time"'])
    response, _ = await run(runtime, request(messages=_asking(ask), tools=[TIME, PERMITTED_WRITE]))
    assert [c.name for c in response.tool_calls or ()] == ["get_current_time"]
    decision = runtime.payloads[0]
    assert decision["regex"] == lt.choice_regex(["get_current_time"], answer=False)  # named by two of its words
    assert decision["messages"][-1]["content"] == 'the current time and "started the report"'
    dated = "在 浇花记录.txt 最后加一行：今天的日期，后面写“龟背竹浇透了”"  # one word, and the present moment
    runtime = ScriptedRuntime(['get_current_time"'])
    response, _ = await run(runtime, request(messages=_asking(dated), tools=[TIME, CALC, PERMITTED_WRITE]))
    assert runtime.payloads[0]["regex"] == lt.choice_regex(["get_current_time"], answer=False)
    ask = "Add to log.txt: what we agreed with the landlord about the boiler"  # names no tool: may be answered
    first, again = ['answer"'], ['get_current_time"']  # answered, its second look not taken: the whole request
    runtime = ScriptedRuntime(first, again, ['write_file"'], ['{"path": "log.txt", "content": "x", "size": 1}'])
    response, _ = await run(runtime, request(messages=_asking(ask), tools=[TIME, PERMITTED_WRITE]))
    assert [c.name for c in response.tool_calls or ()] == ["write_file"]
    assert runtime.payloads[0]["regex"] == lt.choice_regex(["get_current_time"])
    assert [p["messages"][-1]["content"] for p in runtime.payloads[1:3]] == [
        "what we agreed with the landlord about the boiler",
        ask,
    ]


async def test_a_file_to_copy_from_is_read_before_the_file_to_write() -> None:
    """ "把 提纲.md 里打了★的问题抄到 清单.txt": offered both, the model wrote the list first, from nothing, to the file
    to copy from; the turn's first step is among the tools that change nothing, on the file named before the change."""
    ask = "把 播客/第12期 采访提纲.md 里打了★的问题单独抄到 追问清单.txt，没打星的不用。"
    runtime = ScriptedRuntime(['read_file"'], ['{"path": "播客/第12期 采访提纲.md"}'])
    response, _ = await run(runtime, request(messages=_asking(ask), tools=[READ_FILE, PERMITTED_WRITE]))
    assert [(c.name, c.args) for c in response.tool_calls or ()] == [("read_file", {"path": "播客/第12期 采访提纲.md"})]
    assert runtime.payloads[0]["regex"] == lt.choice_regex(["read_file"], answer=False)
    source = {"type": "string", "enum": ["播客/第12期 采访提纲.md"]}
    assert runtime.payloads[1]["json_schema"]["properties"]["path"] == source
    assert lt.sources_first(["a.txt", "b.txt"], "Rename a.txt to b.txt") == []  # the changed file named first
    assert lt.sources_first(["a.txt", "b.txt"], "Compare a.txt with b.txt") == []  # nothing changed


async def test_a_write_of_what_the_users_notes_hold_searches_the_notes_first() -> None:
    """ "Copy my OBS stream settings from my notes into stream-settings.txt": the named file narrowed the first step to
    the file tools and the write was of a placeholder; the notes the request takes it from are searched first."""
    ask = "Copy my OBS stream settings from my notes into stream-settings.txt, I'm setting up the new PC tonight"
    runtime = ScriptedRuntime(['knowledge_search"'], ['{"query": "OBS stream settings"}'])
    response, _ = await run(runtime, request(messages=_asking(ask), tools=[READ_FILE, PERMITTED_WRITE, NOTES]))
    searched = [("knowledge_search", {"query": "OBS stream settings"})]
    assert [(c.name, c.args) for c in response.tool_calls or ()] == searched
    assert runtime.payloads[0]["regex"] == lt.choice_regex(["knowledge_search"], answer=False)
    tools = defs(READ_FILE, PERMITTED_WRITE, NOTES)
    assert lt.taken_from(tools, "把笔记里的车险信息整理到 车险.txt") == tools[2]
    assert lt.taken_from(tools, "Save this note to notes.md") is None  # the note is this one, the file names it
    assert lt.taken_from(tools, "Summarise notes/ideas.md into summary.md") is None


async def test_a_text_written_empty_is_no_call() -> None:
    ask = "Put the wifi details from my notes into wifi.txt"
    found = ("knowledge_search", {"query": "wifi"}, True, "[1] Home wifi: network Larkspur-5G")
    runtime = ScriptedRuntime(['write_file"'], ["\n```\n"], ["The wifi is Larkspur-5G."], score=-0.05)
    response, _ = await run(runtime, request(messages=_turn(ask, found), tools=[NOTES, PERMITTED_WRITE]))
    assert not response.tool_calls and response.content == "The wifi is Larkspur-5G."


def test_a_number_stated_as_a_percentage_is_its_fraction_unless_the_argument_takes_a_percentage() -> None:
    """ "a 60% chance" → ``probability_of_success: 60`` (BFCL parallel, a tuning case): the fraction, 0.6."""
    params = {
        "type": "object",
        "properties": {
            "probability_of_success": {"type": "number", "description": "The probability of a success."},
            "trials": {"type": "integer"},
            "brightness": {"type": "number", "description": "Screen brightness level in percentage."},
        },
    }
    chance = "A player makes 60% of his shots: in 10 shots, the chance of 7? Set brightness to 70%."
    args = {"probability_of_success": 60, "trials": 10, "brightness": 70}
    assert lt.fractions_of_percentages(args, params, chance) == {**args, "probability_of_success": 0.6}
    fraction = {"probability_of_success": 0.6}
    assert lt.fractions_of_percentages(fraction, params, chance) == fraction
    again = "5% a year for 5 years"  # 5 is stated as a count too: left as written
    assert lt.fractions_of_percentages({"probability_of_success": 5}, params, again) == {"probability_of_success": 5}
    assert lt.fractions_of_percentages({"probability_of_success": 7}, params, "7 per cent") == {
        "probability_of_success": 0.07
    }
    assert lt.fractions_of_percentages(args, params, "no percentage here: 60, 70") == args
    whole = {"type": "object", "properties": {"brightness": {"type": "number", "description": "Level (integer, 0-255)"},
                                              "level": {"type": "number", "description": "Volume 0-100"}}}  # fmt: skip
    dim = {"brightness": 30, "level": 30}  # a review's: "Dim the lights to 30%" → 0.3 on an integer, a 0–100 scale
    assert lt.fractions_of_percentages(dim, whole, "Dim the lights to 30%") == dim


def test_a_percentage_within_a_formula_is_its_fraction() -> None:
    """ "What's 17% of 2,340?" offered mcp-server-calculator → ``17% * 2340``, a remainder with no left operand to
    a Python-style parser; a remainder written as one stays."""
    params = {"type": "object", "properties": {"expression": {"type": "string", "description": "The expression."}}}

    def written(expression: str, text: str) -> str:
        return lt.fractions_of_percentages({"expression": expression}, params, text)["expression"]

    assert written("17% * 2340", "What's 17% of 2,340?") == "0.17 * 2340"
    assert written("2340*17%", "17 percent of 2340") == "2340*0.17"
    assert written("12.5% * 80", "12.5% of 80") == "0.125 * 80"
    assert written("2340 * 17 %", "2340的17%是多少") == "2340 * 0.17"
    for left in ("(1 + 5%) ** 10 * 100", "250 + 5%", "5%"):  # not multiplied by: the calculator's own rules
        assert written(left, "100 at 5% a year, add 5%, set it to 5%") == left
    assert written("17 % 5", "17% 5") == "17 % 5"  # an operand follows: a remainder
    assert written("30% * 50", "What's 17% of 2,340?") == "30% * 50"  # not a percentage the request states
    takes = {"type": "object", "properties": {"expression": {"type": "string", "description": "Use % for percent."}}}
    assert lt.fractions_of_percentages({"expression": "17% * 2340"}, takes, "17% of 2340") == {
        "expression": "17% * 2340"
    }


def test_a_coordinate_stated_south_or_west_is_negative() -> None:
    """ "(33.4484 N, 112.0740 W)" → ``coord1: [33.4484, 112.074]`` (BFCL simple, a tuning case): a point in China
    for one in Arizona. Only coordinates' arguments, only numbers stated with that hemisphere alone."""
    params = {
        "type": "object",
        "properties": {
            "coord1": {"type": "array", "description": "The first coordinate as (latitude, longitude)."},
            "coord2": {"type": "array"},
            "unit": {"type": "string"},
            "place": {"type": "object"},
            "radius": {"type": "number"},
        },
    }
    text = "Distance between (33.4484 N, 112.0740 W) and (34.0522° N, 118.2437° W) in miles."
    args = {"coord1": [33.4484, 112.074], "coord2": [34.0522, 118.2437], "unit": "miles"}
    assert lt.signed_coordinates(args, params, text) == {
        "coord1": [33.4484, -112.074], "coord2": [34.0522, -118.2437], "unit": "miles"
    }  # fmt: skip
    assert lt.signed_coordinates({"coord1": [33.4484, -112.074]}, params, text) == {"coord1": [33.4484, -112.074]}
    sydney = "Sydney: 33.87 degrees south, 151.21 degrees east, within 12 W of power"  # 12 W: watts, no coordinate
    assert lt.signed_coordinates({"place": {"lat": 33.87, "lng": 151.21}, "radius": 12}, params, sydney) == {
        "place": {"lat": -33.87, "lng": 151.21}, "radius": 12
    }  # fmt: skip
    nyc = "from 40.7128 N 74.0060 W to 40.7128°N 74.0060°W, and N40.7 W74.0"  # a review's: N before the next number
    assert lt.signed_coordinates({"coord1": [40.7128, 74.006], "coord2": [40.7, 74.0]}, params, nyc) == {
        "coord1": [40.7128, -74.006], "coord2": [40.7, -74.0]
    }  # fmt: skip
    own = {"place": {"lat": 33.4, "lat_hemisphere": "S"}}  # a hemisphere of its own: as written
    assert lt.signed_coordinates(own, params, "33.4 S") == own
    chinese = "西经118.24，北纬34.05 附近"
    assert lt.signed_coordinates({"coord1": [34.05, 118.24]}, params, chinese) == {"coord1": [34.05, -118.24]}
    for plain in ("from 33.4 N to 33.4", "5 s later at 112.07", "W 42nd Street, 42 floors", "Route 112 westbound"):
        assert lt.signed_coordinates({"coord1": [33.4, 112.07], "coord2": [42, 112]}, params, plain) == {
            "coord1": [33.4, 112.07], "coord2": [42, 112]
        }, plain  # fmt: skip


def test_a_duration_stated_in_another_unit_is_written_in_the_arguments_unit() -> None:
    """ "it should expire after 2 hours" offered Redis's ``set(expireSeconds)`` → ``expireSeconds: 2``: 7200."""
    params = {
        "type": "object",
        "properties": {
            "expireSeconds": {"type": "number"},
            "timeout": {"type": "integer", "description": "How long to wait (ms)."},
            "duration_minutes": {"type": "integer"},
            "count": {"type": "integer"},
        },
    }
    assert lt.converted_durations({"expireSeconds": 2}, params, "expire after 2 hours") == {"expireSeconds": 7200}
    assert lt.converted_durations({"expireSeconds": 2}, params, "2小时后过期") == {"expireSeconds": 7200}
    assert lt.converted_durations({"expireSeconds": 30}, params, "在30分钟后过期") == {"expireSeconds": 1800}  # digits
    assert lt.converted_durations({"expireSeconds": 3}, params, "第3天的记录") == {"expireSeconds": 3}  # beside 汉字
    hours = {"type": "object", "properties": {"hours": {"type": "integer"}}}  # "过去三天" → hours: 3 (a blind set)
    assert lt.converted_durations({"hours": 3}, hours, "看看 garage_door 过去三天的状态变化记录") == {"hours": 72}
    assert lt.converted_durations({"hours": 1}, hours, "第一天的记录") == {"hours": 1}  # an ordinal
    assert lt.converted_durations({"timeout": 5}, params, "give up after 5 s") == {"timeout": 5000}
    assert lt.converted_durations({"expireSeconds": 7200}, params, "2 hours") == {"expireSeconds": 7200}
    for kept, text in (
        ({"expireSeconds": 2, "count": 2}, "2 items, then 2 hours"),  # 2 stated without a unit too
        ({"duration_minutes": 90}, "a 90 second call"),  # 1.5: not whole, an integer
        ({"duration_minutes": 90}, "a 90 minute call"),  # its own unit
        ({"count": 2}, "2 hours"),  # no unit of its own
        ({"expireSeconds": 3}, "3 hours or 3 days"),  # two units: which?
    ):
        assert lt.converted_durations(kept, params, text) == kept, text
    retries = {"type": "integer", "description": "Retries. Delay in seconds."}
    rates = {"type": "object", "properties": {"hours_per_day": {"type": "number"}, "minute": {"type": "integer"},
                                              "retries": retries}}  # fmt: skip
    for kept, text in (  # a review's: a rate, a clock's minute, another clause's unit
        ({"hours_per_day": 2}, "screen time 2 hours per day"),
        ({"minute": 45}, "Start the sprinkler at 5:45 and run it for 45 seconds"),
        ({"retries": 3}, "Retry the webhook for 3 days"),
    ):
        assert lt.converted_durations(kept, rates, text) == kept, text


def test_a_duration_in_words_is_a_number_stated_and_converted() -> None:
    """ "一小时后自动过期" offered Redis's ``set(expiration)`` had its expiry left out: 一 was no number the request
    states, so an optional number had nothing to be (a blind set of other people's tools). One and a half, in
    words, are stated where they say a length of time — not a rate, not a price's unit."""
    params = {"type": "object", "properties": {"expiration": {"type": "number", "description": "TTL in seconds"}}}
    for text, number, seconds in (
        ("把 feature:dark_mode 设成 on，一小时后自动过期", 1, 3600),
        ("半小时后过期", 0.5, 1800),
        ("一个星期内有效", 1, 604800),
        ("make it expire in half an hour", 0.5, 1800),
        ("keep it for one day", 1, 86400),
        ("expire in an hour", 1, 3600),
    ):
        assert lt.stated_numbers(text) == [number], text
        assert lt.converted_durations({"expiration": number}, params, text) == {"expiration": seconds}, text
    assert lt.converted_durations({"expiration": 20}, params, "expire in twenty minutes") == {"expiration": 1200}
    for text in ("翻下我笔记，羽毛球场地费一小时多少钱？", "paid at $42.50 an hour", "remind me once a day",
                 "how much is it an hour", "有一天我会去", "等一下", "在同一天内创建的文件有哪些", "这一周内的会议",
                 "前一天后端报了什么错", "每一小时后执行一次", "after an hours-long outage, open an incident",
                 "一个半小时后过期"):  # fmt: skip  # a review's (2026-12-07): no length of time of one number
        assert 1 not in lt.stated_numbers(text) and 0.5 not in lt.stated_numbers(text), text


def test_the_readings_of_a_calls_arguments_reach_a_nested_objects_arguments() -> None:
    """A tool that takes one object (``search_flights(params: {…})``, a Pydantic input model): an empty
    ``additional_stops: []`` written inside it was left untouched by what reads the top level's (a blind set of
    other people's tools); so would a number reused (``max_price: 2`` of "2 adults") or a duration's unit."""
    inner = {
        "type": "object",
        "required": ["origin", "adults"],
        "properties": {
            "origin": {"type": "string"},
            "adults": {"type": "integer"},
            "max_price": {"type": "number"},
            "additional_stops": {"type": "array", "items": {"type": "string"}},
            "hold": {"type": "object", "properties": {"ttl_seconds": {"type": "integer"}}},
        },
    }
    params = {"type": "object", "required": ["params"], "properties": {"params": inner}}
    text = "Find flights from SFO for 2 adults, and hold the fare for 3 hours"
    written = {"params": {"origin": "SFO", "adults": 2, "max_price": 2, "additional_stops": [],
                          "hold": {"ttl_seconds": 3}}}  # fmt: skip
    args = lt.within(lt.without_empty, written, params)
    args = lt.within(lt.spare_numbers, args, params, text)
    args = lt.within(lt.converted_durations, args, params, text)
    assert args == {"params": {"origin": "SFO", "adults": 2, "hold": {"ttl_seconds": 10800}}}
    assert written["params"]["additional_stops"] == []  # the model's own arguments are not changed in place
    assert lt.empties("Clear the description of task 123") and lt.empties("把标签清空")  # a nested empty: as asked
    assert not lt.empties("Find flights from SFO")


def test_an_amount_in_cents_is_constrained_to_the_stated_money_times_a_hundred() -> None:
    """ "Please refund $12.50 of payment intent pi_…" offered Stripe's ``create_refund(amount: "in cents")``: the
    model ran ``12500000000000000…`` to the grammar's bound and no refund was made (a blind set)."""
    params = {
        "type": "object",
        "properties": {
            "payment_intent": {"type": "string"},
            "amount": {"type": "integer", "description": "The amount to refund in cents."},
            "fee": {"type": "number", "description": "A fee in dollars."},
        },
        "required": ["payment_intent", "amount"],
    }

    def schema(text: str) -> dict[str, Any]:
        return lt.in_minor_units(lt.arguments_schema(params, numbers=lt.stated_numbers(text)), params, text)

    assert schema("Please refund $12.50 of pi_3Mtw")["properties"]["amount"] == {"type": "integer", "enum": [1250]}
    assert schema("退款 12.5 元")["properties"]["amount"]["enum"] == [1250]
    assert schema("Refund $12.50 of pi_3Mtw")["properties"]["fee"] == {"type": "number", "enum": [12.5]}  # dollars
    for whole in (
        "refund ¥500 of pi_3Mtw",  # no minor unit
        "refund pi_3Mtw in full",  # no money stated
        "Refund half of the $50 charge",  # worked out from it (a review's)
        "$12.50 minus the $2 fee",
        "$15 each for 3 tickets",
        "refund €12,50",  # a decimal comma
        "refund $1.2k",
        "退款 12.5 元和 3 美元",  # two amounts: which?
    ):
        assert schema(whole)["properties"]["amount"] == {"type": "integer"}, whole


def test_a_question_that_asks_for_no_action_is_not_a_tools_that_changes_things() -> None:
    merge = defs({**tool("merge_pull_request", "repo"), "description": "Merge a pull request"})[0]
    for text in ("Which PRs are waiting on review?", "acme/api 有哪些开着的 PR？", "What is LangChain?"):
        assert lt.asks_not_does(merge, text), text
    for text in (
        "prs open on acme/api?",  # no question word: a terse command reads the same ("Refund charge ch_123?")
        "merge pr 5?",  # its own verb
        "Is PR 5 merged yet?",  # its verb's word, whatever it asks: let be
        "Can you merge PR 5?",
        "Is there a way to get PR 5 into main?",  # a request asked as a question
        "Is it possible to land PR 5 today?",
        "Do you mind landing PR 5?",
        "What's in PR 5? I'd like it in main.",
        "Which PRs are open? Merge the green ones.",  # a command after the question
        "帮我合并 PR 5 好吗？",
        "你可以合并 acme/api 的 PR 12 吗？",  # a Chinese request form
        "关掉所有灯。然后告诉我还有哪些开着？",
        "List the open PRs on acme/api",  # no question
    ):
        assert not lt.asks_not_does(merge, text), text
    listing = defs({**tool("list_pull_requests", "repo"), "description": "List pull requests"})[0]
    assert not lt.asks_not_does(listing, "Which PRs are open on acme/api?")  # a tool that changes nothing
    add = defs({**tool("add", "a"), "description": "Add two numbers"})[0]
    assert not lt.asks_not_does(add, "What is 1234 plus 5678?")  # add sums: no verb that changes whatever it takes


async def test_a_merge_picked_for_a_question_is_decided_again_without_it() -> None:
    """ "prs open on acme/api?" offered GitHub's tools → ``merge_pull_request(pullNumber: 123)`` (a blind set); asked
    as a question, decided again without the merge."""
    merge = {**tool("merge_pull_request", "repo"), "description": "Merge a pull request"}
    listing = {**tool("list_pull_requests", "repo"), "description": "List pull requests in a repository"}
    ask = [{"role": "user", "content": "Which PRs are open on acme/api?", "timestamp": 1}]
    runtime = ScriptedRuntime(['merge_pull_request"'], ['list_pull_requests"'], ['{"repo": "acme/api"}'])
    response, _ = await run(runtime, request(messages=ask, tools=[merge, listing]), FavouringEmbedder("pull"))
    assert [(c.name, c.args) for c in response.tool_calls or ()] == [("list_pull_requests", {"repo": "acme/api"})]
    assert runtime.payloads[1]["regex"] == lt.choice_regex(["list_pull_requests"])


def test_a_request_told_to_answer_from_what_the_model_knows_calls_nothing() -> None:
    for text in (
        "不要去 Linear 里查，凭经验说说：五个人的小团队、两周一个迭代，一般安排多少故事点比较合理？",
        "算了，先别碰邮箱了。你就按常识说说，年终总结邮件一般会写哪几部分？",
        "Then based purely on the name, what would you guess that repo contains?",
        "Without looking it up, what is the capital of Peru?",
        "Don't call any tools: what is 2+2?",
        "don't search my library - just off the top of your head, what BibTeX entry type is a conference paper?",
        "不要查我的笔记，凭经验说说红烧肉一般要炖多久？",  # what is not to be searched is no question of the user's own
    ):
        assert lt.from_knowledge(text), text
    for text in (
        "Don't search the web, search my notes for the wifi password",  # another look-up asked for
        "不要查 Linear，去 GitHub 查一下 issue 5",
        "Don't call me Shirley, what is the weather in Paris?",
        "别忘了查一下明天的天气",  # don't forget to
        "Check the weather in Paris",
        "No need to check the cache, just delete the key session:42 in Redis.",  # a review's: an action asked
        "Without checking anything, restart the nginx container.",
        "不用搜了，打开客厅的灯。",
        "不要查了，直接帮我把 issue #42 关掉。",
        "Don't search the web for it; my notes have it. What's the wifi password?",  # another source
        "不要上网查，我的笔记里有，wifi 密码是什么？",
        "我不想你凭感觉，去查一下 acme/api 有多少个 open 的 PR？",  # the cue negated
        "From your knowledge of Stripe, create a $5 test product called Coffee.",
        "Don't search the web, what's my wifi password?",  # the user's own thing, asked outside the ban
        "Don't search the web look in my notes for the wifi password?",  # a review's: a source after the ban
        "别上网搜 用我的笔记 wifi密码是多少？",
    ):
        assert not lt.from_knowledge(text), text


async def test_a_request_that_says_not_to_look_it_up_is_answered() -> None:
    ask = [{"role": "user", "content": "不要去 Linear 里查，凭经验说说：一个迭代安排多少故事点合适？", "timestamp": 1}]
    search = {**tool("linear_search_issues", "query"), "description": "Search Linear issues"}
    runtime = ScriptedRuntime(["一般 20 到 30 点。"])
    response, _ = await run(runtime, request(messages=ask, tools=[search]), FavouringEmbedder("search"))
    assert response.tool_calls is None and response.content == "一般 20 到 30 点。"
    assert "regex" not in runtime.payloads[0]  # no decision was asked for


def test_a_tool_that_creates_is_not_the_call_for_a_change_to_what_exists() -> None:
    create = defs({**tool("create_repository", "name"), "description": "Create a new GitHub repository"})[0]
    for text in (
        "把 acme/widgets 这个仓库从公开改成私有。",
        "Change acme/widgets to private",
        "Rename the repo to gadgets",
    ):
        assert lt.opposed(create, request(messages=_asking(text)).messages), text
    for text in (
        "Create a private repo named widgets",
        "把仓库改成私有的，再新建一个公开的",
        "Make a repo called widgets",
        "Change of plans: put a dentist appointment on my calendar",  # a review's: no command to change
        "Edit: forgot to say, make it private",
        "在 Todoist 加个任务：修改简历。",  # the task's text
        "我修改了 README，帮我提交一个 PR",
        "please update the repo's topics",  # update: a new post as often ("Update #eng: …")
    ):
        assert not lt.opposed(create, request(messages=_asking(text)).messages), text
    update = defs({**tool("create_or_update_file", "path"), "description": "Create or update a file"})[0]
    assert not lt.opposed(update, request(messages=_asking("Change the README title")).messages)  # it updates too


def _petstore() -> tuple[dict[str, Any], dict[str, Any]]:
    """The Swagger Petstore's two look-ups: by a status of three choices, by tags."""
    status = {**tool("findPetsByStatus", "status"), "description": "Finds pets by status"}
    choices = {"type": "string", "description": "Status", "enum": ["available", "pending", "sold"]}
    status["parameters"]["properties"]["status"] = choices
    return status, {**tool("findPetsByTags", "tags"), "description": "Finds pets by tags"}


def test_a_pick_whose_choice_the_request_spells_does_not_give_way_to_a_nearer_tool() -> None:
    status, tags = _petstore()
    by_status, by_tags = defs(status, tags)
    sold = "list all pets in the petstore that have been sold"
    assert lt.spells_its_choice(by_status, sold) and not lt.spells_its_choice(by_tags, sold)
    assert not lt.spells_its_choice(by_status, "list all pets")
    assert not lt.spells_its_choice(by_status, "pets not sold")  # negated


async def test_the_adapter_keeps_an_unsure_pick_whose_choice_the_request_spells() -> None:
    """ "…that have been sold": the model's unsure ``findPetsByStatus`` had given way to the embedder's nearer
    ``findPetsByTags`` (``tags: ["sold"]``; a blind set)."""
    status, tags = _petstore()
    ask = [{"role": "user", "content": "list all pets in the petstore that have been sold", "timestamp": 1}]
    unsure = math.log(lt.NEARER_P) - 0.5
    runtime = ScriptedRuntime(['findPetsByStatus"'], ['{"status": "sold"}'], score=unsure)

    class TagsNearer(FavouringEmbedder):
        def embed(self, texts: list[str]) -> np.ndarray:
            half = [0.5, math.sqrt(0.75)]  # findPetsByStatus near enough, findPetsByTags nearer
            return np.array(
                [[1.0, 0.0] if i == 0 or t.startswith("findPetsByTags") else half for i, t in enumerate(texts)]
            )

    response, _ = await run(runtime, request(messages=ask, tools=[status, tags]), TagsNearer())
    assert [(c.name, c.args) for c in response.tool_calls or ()] == [("findPetsByStatus", {"status": "sold"})]


# ---- a statement for another tool; the answer given as the question ------------------------------------------

READ_QUERY = {
    **tool("read_query", "query"),
    "description": "Execute a SELECT query on the SQLite database",
}
WRITE_QUERY = {
    **tool("write_query", "query"),
    "description": "Execute an INSERT, UPDATE, or DELETE query on the SQLite database",
}
CREATE_TABLE = {**tool("create_table", "query"), "description": "Create a new table in the SQLite database"}
_COORDINATES = {
    "type": "object",
    "properties": {
        "latitude": {"type": "number", "description": "Latitude coordinate"},
        "longitude": {"type": "number", "description": "Longitude coordinate"},
    },
    "required": ["latitude", "longitude"],
}
REVERSE_GEOCODE = {
    **tool("maps_reverse_geocode"),
    "description": "Convert coordinates into an address",
    "parameters": _COORDINATES,
}
GEOCODE = {**tool("maps_geocode", "address"), "description": "Convert an address into geographic coordinates"}


def test_a_statement_goes_to_the_tool_whose_description_runs_it() -> None:
    """mcp-server-sqlite's ``read_query`` runs SELECTs only; a DELETE written for it is ``write_query``'s."""
    tools = defs(READ_QUERY, WRITE_QUERY, CREATE_TABLE)
    read, write, _ = tools

    def to(tool: MetonaToolDef, query: str) -> str | None:
        other = lt.takes_the_statement(tool, {"query": query}, tools)
        return other.name if other else None

    assert to(read, "DELETE FROM orders WHERE status = 'cancelled';") == "write_query"
    assert to(read, "update users set name = 'x' where id = 1") == "write_query"
    assert to(write, "CREATE TABLE t (id INTEGER PRIMARY KEY)") == "create_table"  # by its name's verb
    assert to(write, "SELECT COUNT(*) FROM users") == "read_query"
    assert to(write, "WITH recent AS (SELECT * FROM t) SELECT id FROM recent") == "read_query"
    assert to(read, "SELECT COUNT(*) FROM users;") is None  # its own
    assert to(write, "-- tidy up\nDELETE FROM logs") is None
    for prose in ("Update the docs", "Delete old files", "create a table for me", "select a winner"):
        assert lt._statement_verb(prose) is None  # words, not a statement
    assert lt.takes_the_statement(read, {"query": "DROP TABLE t"}, tools) is None  # nobody says it runs a DROP
    assert lt.takes_the_statement(read, {"query": "DELETE FROM t"}, defs(READ_QUERY)) is None
    dropper = defs({**tool("delete_table", "query"), "description": "Delete a table."})[0]
    assert to(read, "DELETE FROM t") == "write_query"
    assert (
        lt.takes_the_statement(read, {"query": "DELETE FROM t"}, [read, write, dropper]) == write
    )  # rows, not a table
    commit = defs(
        {**tool("create_file", "content"), "description": "Create a file."},
        {**tool("update_file", "content"), "description": "Update a file."},
    )
    assert lt.takes_the_statement(commit[0], {"content": "Update the docs"}, commit) is None  # no SQL at all
    either = defs(WRITE_QUERY, {**tool("run_sql", "query"), "description": "Run a DELETE or UPDATE statement."})
    assert lt.takes_the_statement(read, {"query": "DELETE FROM t"}, [read, *either]) is None  # two could: left
    other_keys = defs({**tool("write_sql", "sql"), "description": "Execute a DELETE."})
    assert lt.takes_the_statement(read, {"query": "DELETE FROM t"}, [read, *other_keys]) is None  # its arguments differ


async def test_a_delete_written_for_the_select_tool_is_called_on_the_tool_that_runs_it() -> None:
    ask = [{"role": "user", "content": "Delete all rows in orders where status is 'cancelled'", "timestamp": 1}]
    statement = "DELETE FROM orders WHERE status = 'cancelled'"
    runtime = ScriptedRuntime(['read_query"'], [json.dumps({"query": statement})])
    response, _ = await run(
        runtime, request(messages=ask, tools=[READ_QUERY, WRITE_QUERY]), FavouringEmbedder("read query")
    )
    assert [(c.name, c.args) for c in response.tool_calls or ()] == [("write_query", {"query": statement})]


def test_a_request_for_coordinates_is_no_input_of_coordinates() -> None:
    reverse, geocode = defs(REVERSE_GEOCODE, GEOCODE)

    def asks(text: str) -> bool:
        return lt.asks_its_inputs(reverse, [MetonaMessage(role="user", content=text, timestamp=1)])

    for text in (
        "杭州西湖的经纬度是多少",
        "查一下西湖的坐标",
        "What are the coordinates of the Eiffel Tower?",
        "Give me the latitude and longitude of Reykjavik",
        "what's the lat/long for Union Square",
    ):
        assert asks(text), text
    for text in (
        "What address is at 40.6892, -74.0445?",  # the coordinates given
        "What's the weather at the coordinates of the Eiffel Tower?",  # coordinates spoken of, not asked for
        "查一下坐标 29.65, 91.13 这个点的地址",
        "What is near the Eiffel Tower?",
    ):
        assert not asks(text), text
    assert not lt.asks_its_inputs(geocode, [MetonaMessage(role="user", content="杭州西湖的经纬度是多少", timestamp=1)])


async def test_coordinates_asked_for_are_looked_up_not_given_as_the_input() -> None:
    """ "杭州西湖的经纬度是多少" offered the Google Maps server's tools went to ``maps_reverse_geocode`` with
    coordinates the model recalled; decided again without it, ``maps_geocode``."""
    ask = [{"role": "user", "content": "杭州西湖的经纬度是多少", "timestamp": 1}]
    runtime = ScriptedRuntime(['maps_reverse_geocode"'], ['maps_geocode"'], ['{"address": "杭州西湖"}'])
    tools = [REVERSE_GEOCODE, GEOCODE]
    response, _ = await run(runtime, request(messages=ask, tools=tools), FavouringEmbedder("maps reverse"))
    assert [(c.name, c.args) for c in response.tool_calls or ()] == [("maps_geocode", {"address": "杭州西湖"})]
    assert runtime.payloads[1]["regex"] == lt.choice_regex(["maps_geocode"])
    runtime = ScriptedRuntime(['maps_reverse_geocode"'], ["大约北纬30.25度，东经120.15度。"])
    response, _ = await run(runtime, request(messages=ask, tools=[REVERSE_GEOCODE]), FavouringEmbedder("maps"))
    assert response.tool_calls is None and response.content == "大约北纬30.25度，东经120.15度。"


def test_a_journey_from_a_place_to_itself_or_an_empty_required_list_is_made_up() -> None:
    """ "…a trip to Los Angeles…" → ``origin_airport: "LAX", destination_airport: "LAX"``; "convert 'sungai long
    burger king' to coordinates" offered a food order → ``items: []`` (BFCL's real users' no-call kind)."""
    assert lt.both_ends({"origin_airport": "LAX", "destination_airport": "LAX", "seating_class": "Economy"}) == [
        "origin_airport",
        "destination_airport",
    ]
    assert lt.both_ends({"from_airport": "PDX", "to_airport": "pdx"}) == ["from_airport", "to_airport"]
    assert lt.both_ends({"source_timezone": "Asia/Tokyo", "target_timezone": "Asia/Tokyo", "time": "15:00"})
    assert lt.both_ends({"source_language": "English", "target_language": "english"})
    for apart in (
        {"from_city": "Portland, OR", "to_city": "Seattle, WA"},
        {"from": "me@example.com", "to": "me@example.com"},  # an e-mail to oneself: bare from/to
        {"start": "tomorrow", "end": "tomorrow"},
        {"start_location": "Central Park", "end_location": "Central Park"},  # a run that ends where it starts
        {"origin": "Seattle", "destination": "Seattle", "waypoints": ["Tacoma"]},  # a loop with stops
        {"start_date": "2023-04-12", "end_date": "2023-04-12"},  # picked up and returned on one day
        {"start": "2023-04-12 10:00", "end": "2023-04-12 10:00"},
        {"start_index": "5", "end_index": "5"},
        {"from_currency": "USD", "to_currency": "EUR"},
        {"from_city": "Boston", "to_airport": "Boston"},  # not one pair
        {"origins": ["Boston"], "destinations": ["Boston"]},
    ):
        assert lt.both_ends(apart) == [], apart
    for qualifier in ("tags", "attendees", "args", "labels", "cc", "filters", "songs"):  # empty is their usual value
        assert not lt._none_listed(qualifier, [], {"save", "a", "note", "buy", "milk"}), qualifier
    said = {"order", "from", "sungai", "long", "burger", "king", "no", "items", "yet"}
    assert lt._none_listed("items", [], {"convert", "sungai", "long", "burger", "king", "to", "coordinates"})
    assert not lt._none_listed("items", [], said)  # spoken of
    assert not lt._none_listed("items", ["Whopper"], set())
    params = {
        "type": "object",
        "properties": {
            "restaurant_id": {"type": "string", "description": "The restaurant."},
            "items": {"type": "array", "items": {"type": "string"}, "description": "What to order."},
        },
        "required": ["restaurant_id", "items"],
    }
    asked = [MetonaMessage(role="user", content="convert 'sungai long burger king' to coordinates", timestamp=1)]
    assert lt.made_up({"restaurant_id": "sungai_long_burger_king", "items": []}, params, asked) == ["items"]


def test_a_chinese_request_that_says_nothing_of_a_tools_topic_is_not_its_call() -> None:
    def off(name: str, text: str) -> bool:
        return lt.off_topic(defs(tool(name))[0], text)

    assert off("get_current_weather", "北京的房价是多少")  # the price of housing
    assert off("get_current_weather", "今天查看北京的新闻")  # the news
    assert not off("get_current_news", "今天查看北京的新闻")
    for text in ("北京明天冷吗", "上海明天要带伞吗", "北京后天的天气如何？", "明天杭州会下雨吗"):
        assert not off("get_current_weather", text), text  # the weather, by any of its words
    assert not off("get_current_weather", "What's the price of housing in Beijing?")  # English: the embedder's
    assert not off("maps_geocode", "北京的房价是多少")  # a tool of no listed topic
    assert not off("flight_search", "帮我订一张去上海的机票") and not off("Movies_1_FindMovies", "周末有什么好看的片子")


async def test_a_weather_tool_picked_for_a_chinese_question_of_house_prices_is_not_called() -> None:
    ask = [{"role": "user", "content": "北京的房价是多少", "timestamp": 1}]
    weather = {**tool("get_current_weather"), "description": "Retrieves the current weather for a location."}
    runtime = ScriptedRuntime(['get_current_weather"'], ["北京的房价因区域而异。"])
    response, _ = await run(runtime, request(messages=ask, tools=[weather]), FavouringEmbedder("get current"))
    assert response.tool_calls is None and response.content == "北京的房价因区域而异。"
    news = {**tool("get_current_news"), "description": "Retrieves the latest news for a location."}
    asked = [{"role": "user", "content": "今天查看北京的新闻", "timestamp": 1}]
    runtime = ScriptedRuntime(['get_current_weather"'], ['get_current_news"'], ['{"location": "北京"}'])
    response, _ = await run(runtime, request(messages=asked, tools=[weather, news]), FavouringEmbedder("get"))
    assert [(c.name, c.args) for c in response.tool_calls or ()] == [("get_current_news", {"location": "北京"})]
    assert runtime.payloads[1]["regex"] == lt.choice_regex(["get_current_news"])


ELEVATION = {**REVERSE_GEOCODE, "name": "elevation", "description": "Get elevation data for given coordinates."}


def test_a_point_written_as_an_address_is_the_point_tools_call() -> None:
    reverse, geocode, _ = tools = defs(REVERSE_GEOCODE, GEOCODE, ELEVATION)
    point = {"latitude": 22.54, "longitude": 114.06}
    for written in ("22.54, 114.06", "(22.54，114.06)", " 22.54,114.06 "):
        assert lt.takes_the_coordinates(geocode, {"address": written}, tools) == (reverse, point), written
    for address in ("Shenzhen", "hotpot near 22.54, 114.06", "95, 200", "1600 Amphitheatre Parkway"):
        assert lt.takes_the_coordinates(geocode, {"address": address}, tools) is None, address
    assert lt.takes_the_coordinates(reverse, {"latitude": "22.54, 114.06"}, tools) is None  # takes coordinates
    pricing = defs({**tool("calculate_dynamic_pricing", "geolocation"), "description": "Price by location."})
    assert lt.takes_the_coordinates(pricing[0], {"geolocation": "34.0522, -118.2437"}, pricing) is None
    unlike = defs(GEOCODE, ELEVATION, {**ELEVATION, "name": "weather_forecast"})
    assert lt.takes_the_coordinates(unlike[0], {"address": "22.54, 114.06"}, unlike) is None  # neither is its kin


async def test_a_point_asked_about_as_an_address_is_called_on_the_reverse_lookup() -> None:
    ask = [{"role": "user", "content": "坐标 22.54, 114.06 是什么地方？", "timestamp": 1}]
    runtime = ScriptedRuntime(['maps_geocode"'], ['{"address": "22.54, 114.06"}'])
    tools = [REVERSE_GEOCODE, GEOCODE, ELEVATION]
    response, _ = await run(runtime, request(messages=ask, tools=tools), FavouringEmbedder("maps geocode"))
    called = [(c.name, c.args) for c in response.tool_calls or ()]
    assert called == [("maps_reverse_geocode", {"latitude": 22.54, "longitude": 114.06})]


AIR_QUALITY = {
    **tool("air_quality"),
    "description": "Get air quality forecast data including PM2.5, PM10, ozone.",
    "parameters": {
        "type": "object",
        "properties": {
            **_COORDINATES["properties"],
            "current": {"type": "array", "items": {"type": "string", "description": "a"}, "description": "Variables."},
            "codes": {"type": "array", "items": {"type": "string", "description": "a"}, "description": "Codes."},
        },
        "required": ["latitude", "longitude"],
    },
}


def test_the_optional_list_a_looping_call_was_writing() -> None:
    params = defs(AIR_QUALITY)[0].parameters.model_dump(mode="json", exclude_none=True)
    looped = '{"latitude": 28.61, "longitude": 77.21, "current": ["pm2_5", "pm10", "ozone", "pm2_5", "pm10"'
    assert lt.looping_list(looped, params, params) == "current"
    assert lt.looping_list('{"current": ["pm10"], "codes": ["a", "b", "a", "b"', params, params) == "codes"
    assert lt.looping_list('{"latitude": 1, "current": ["pm10"], "x": "12341234', params, params) is None  # closed
    assert lt.looping_list('{"current": ["pm10"], "x": {"y": ["a", "a", "a"', params, params) is None  # closed, deeper
    required = {**params, "required": ["latitude", "longitude", "current"]}
    assert lt.looping_list(looped, required, required) is None  # the call itself loops: dropped
    assert lt.looping_list('{"latitude": 28.61', params, params) is None


async def test_an_optional_list_that_starts_over_is_left_out_and_the_call_made() -> None:
    """ "How's the air in Delhi right now? It's at 28.61, 77.21": the air-quality call's optional ``current`` list
    repeated its four items until the loop guard stopped it, and the call was dropped."""
    ask = [{"role": "user", "content": "How's the air in Delhi right now? It's at 28.61, 77.21", "timestamp": 1}]
    looped = '{"latitude": 28.61, "longitude": 77.21, "current": ["pm2_5", "pm10", "pm2_5", "pm10"'

    class Looping(ScriptedRuntime):
        async def generate(self, payload: dict[str, Any], on_delta: Any, *, model_path: str | None = None) -> dict:
            done = await super().generate(payload, on_delta, model_path=model_path)
            return {**done, "finish": "loop"} if len(self.payloads) == 2 else done

    runtime = Looping(['air_quality"'], [looped], ['{"latitude": 28.61, "longitude": 77.21}'])
    response, _ = await run(runtime, request(messages=ask, tools=[AIR_QUALITY]), FavouringEmbedder("air"))
    assert [(c.name, c.args) for c in response.tool_calls or ()] == [
        ("air_quality", {"latitude": 28.61, "longitude": 77.21})
    ]
    assert "current" not in runtime.payloads[2]["json_schema"]["properties"]
    assert "codes" not in runtime.payloads[2]["json_schema"]["properties"]  # another optional list nobody spoke of
    params = defs(AIR_QUALITY)[0].parameters.model_dump(mode="json", exclude_none=True)
    kept = lt.without_lists(params, params, "current", "the air at 28.61, 77.21, and its codes")
    assert set(kept["properties"]) == {"latitude", "longitude", "codes"}  # a list the request speaks of is kept
    runtime = Looping(['air_quality"'], ['{"latitude": 28.61, "longitude": 77.2121212121'], ["It is fine."])
    response, _ = await run(runtime, request(messages=ask, tools=[AIR_QUALITY]), FavouringEmbedder("air"))
    assert not response.tool_calls  # a loop elsewhere: dropped, the user told
    assert response.content.startswith(lt.cut_notice("air_quality", "loop", request(messages=ask).messages))


GIT_ADD = {**tool("git_add", "repo_path"), "description": "Adds file contents to the staging area"}
GIT_RESET = {**tool("git_reset", "repo_path"), "description": "Unstages all staged changes"}


def test_a_command_the_tool_undoes_is_its_opposite() -> None:
    def opposed(definition: dict[str, Any], text: str) -> bool:
        return lt.opposed(defs(definition)[0], [MetonaMessage(role="user", content=text, timestamp=1)])

    assert opposed(GIT_RESET, "Stage README.md and setup.py in ~/code/tool")  # by its description's first word
    assert opposed(tool("unfollow_user"), "Follow @ana please") and opposed(tool("uninstall_package"), "Install numpy")
    assert opposed(tool("unlock_door"), "Can you lock the front door?")
    assert not opposed(GIT_RESET, "ugh, unstage everything in ~/code/notes, I added the wrong files")
    assert not opposed(tool("unfollow_user"), "Please unfollow @ana")
    assert not opposed(tool("unmute"), "I'm on mute, fix it")  # a state described, no command
    assert not opposed(GIT_ADD, "Stage README.md") and not opposed(tool("update_record"), "Update the record")


async def test_a_pick_that_undoes_what_is_asked_is_decided_again_without_it() -> None:
    ask = [{"role": "user", "content": "Stage README.md and setup.py in ~/code/tool", "timestamp": 1}]
    called = '{"repo_path": "~/code/tool"}'
    runtime = ScriptedRuntime(['git_reset"'], ['git_add"'], [called])
    response, _ = await run(runtime, request(messages=ask, tools=[GIT_RESET, GIT_ADD]), FavouringEmbedder("git"))
    assert [(c.name, c.args) for c in response.tool_calls or ()] == [("git_add", {"repo_path": "~/code/tool"})]
    assert "git_add" in runtime.payloads[1]["regex"] and "git_reset" not in runtime.payloads[1]["regex"]
    runtime = ScriptedRuntime(['git_reset"'], ["Run git add README.md setup.py."])
    response, _ = await run(runtime, request(messages=ask, tools=[GIT_RESET]), FavouringEmbedder("git"))
    assert response.tool_calls is None and response.content == "Run git add README.md setup.py."


def test_a_value_written_as_its_absence_is_made_up() -> None:
    """ "What is the highest grossing movie of all time?" offered a movie search → ``title: "none", year: 1977``: the
    title is no title (the year is let be: a year nobody said was tried and dropped on a review — "find the movie
    titanic", a tax year meant as this one)."""
    params = {
        "type": "object",
        "properties": {
            "title": {"type": "string", "description": "Movie title"},
            "year": {"type": "integer", "description": "Release year"},
        },
        "required": ["title", "year"],
    }

    def made_up(args: dict[str, Any], text: str) -> list[str]:
        return lt.made_up(args, params, [MetonaMessage(role="user", content=text, timestamp=1)])

    assert made_up({"title": "none", "year": 1977}, "What is the highest grossing movie of all time?") == ["title"]
    assert made_up({"title": "Titanic", "year": 1997}, "find the movie titanic") == []
    assert made_up({"title": "N/A", "year": 1997}, "a movie from 1997, title n/a") == []  # said
    assert made_up({"title": "none", "year": 1997}, "a movie from 1997, I don't know its title") == []  # negated
    assert lt._no_value("none", {"type": "string"}, "book nopa for two, no special requests") is False
    with_choice = {**params, "properties": {**params["properties"], "title": {"type": "string", "enum": ["none"]}}}
    assert lt._no_value("none", with_choice["properties"]["title"], "") is False  # a choice it offers
    assert lt._no_value("Not specified", {"type": "string", "default": "Not specified"}, "") is False
    assert lt._no_value("unknown", {"type": "string", "description": "A name."}, "") is True


def test_the_rules_of_a_statement_a_point_and_an_undoing_leave_a_reviews_right_calls_alone() -> None:
    """Inputs a review wrote against the first versions (2026-12-06), each once refused or moved wrongly."""
    read, write = defs(READ_QUERY, WRITE_QUERY)
    chart = defs({**tool("create_chart", "query"), "description": "Create a chart from a query."})[0]
    assert lt.takes_the_statement(chart, {"query": "SELECT month, total FROM sales"}, [chart, read, write]) is None
    writing_cte = "WITH old AS (SELECT id FROM t WHERE d < 1) DELETE FROM t WHERE id IN (SELECT id FROM old)"
    assert lt._statement_verb(writing_cte) == "DELETE" and lt._statement_verb("with love from Paris") is None
    refusing = defs({**tool("run_query", "query"), "description": "Run SQL. INSERT, UPDATE and DELETE are rejected."})
    explain = defs({**tool("explain_query", "query"), "description": "EXPLAIN a SELECT statement."})
    assert lt.takes_the_statement(refusing[0], {"query": "SELECT 1 FROM t"}, [*refusing, *explain]) is None
    forecast = defs({**REVERSE_GEOCODE, "name": "get_forecast"})[0]
    printer = defs({**tool("print_document", "pages"), "description": "Print pages."})[0]
    assert lt.takes_the_coordinates(printer, {"pages": "3.5, 5.5"}, [printer, forecast]) is None
    route = defs(
        {
            **tool("route", "origin"),
            "parameters": {
                "type": "object",
                "properties": {
                    "origin": {"type": "string", "description": "From."},
                    "destination": {"type": "string", "description": "To."},
                },
                "required": ["origin", "destination"],
            },
        }
    )[0]
    reverse = defs(REVERSE_GEOCODE)[0]
    assert (
        lt.takes_the_coordinates(route, {"origin": "22.54, 114.06", "destination": "Futian"}, [route, reverse]) is None
    )
    nearby = defs(
        {
            **tool("search_nearby"),
            "parameters": {
                "type": "object",
                "properties": {
                    **_COORDINATES["properties"],
                    "keyword": {"type": "string", "description": "What to find."},
                },
                "required": ["latitude", "longitude", "keyword"],
            },
        }
    )[0]
    asked = [MetonaMessage(role="user", content="Find the coordinates of the nearest gas station", timestamp=1)]
    assert not lt.asks_its_inputs(nearby, asked)  # it takes more than the point
    followed = [
        MetonaMessage(role="user", content="I'm at 48.8584, 2.2945", timestamp=1),
        MetonaMessage(role="assistant", content="Noted.", timestamp=2),
        MetonaMessage(role="user", content="What are the coordinates in degrees, minutes and seconds?", timestamp=3),
    ]
    assert not lt.asks_its_inputs(reverse, followed)  # the numbers were given earlier
    template = defs({**tool("render", "template"), "description": "Render a template."})[0]
    assert not lt.asks_its_inputs(template, [MetonaMessage(role="user", content="坐标是多少", timestamp=1)])

    def opposed(definition: dict[str, Any], text: str) -> bool:
        return lt.opposed(defs(definition)[0], [MetonaMessage(role="user", content=text, timestamp=1)])

    assert not opposed(tool("unread_notifications"), "Read my notifications")  # a state, not an undoing
    assert not opposed(tool("list_unread_emails"), "Read my new emails")
    assert not opposed(tool("lock_unlock_door"), "Lock the door")  # it does both
    schema = {"type": "object", "properties": {"cc": {"type": "array"}, "filter": {"type": "object"}}}
    named = '{"cc": ["ann@x.com", "bob@x.com", "ann@x.com", "bob@x.com"'
    assert lt.looping_list(named, schema, schema, "cc ann@x.com and bob@x.com") is None  # the user's own list
    nested = '{"filter": {"tags": ["a", "b", "a", "b"'
    assert lt.looping_list(nested, {**schema, "properties": {**schema["properties"], "tags": {"type": "array"}}},
                           schema, "x") is None  # fmt: skip


def test_a_second_reviews_right_calls_are_left_alone() -> None:
    """Inputs a second review wrote against the narrowed rules (2026-12-06), each once refused or moved wrongly."""

    def off(name: str, text: str) -> bool:
        return lt.off_topic(defs(tool(name))[0], text)

    assert not off("flight_search", "明天北京到上海多少钱") and not off("hotel_search", "外滩附近一晚多少钱")
    assert not off("Movies_FindMovies", "流浪地球2的票多少钱") and not off("get_news", "今天微博热搜是什么")
    assert not off("get_current_weather", "我住在杭州，周末适合出门吗")
    assert lt.both_ends({"from_country": "US", "to_country": "US", "from_city": "Austin", "to_city": "Boston"}) == []
    assert lt.both_ends({"from_city": "上海", "to_city": "上海"}) == []  # a same-city courier
    assert lt.both_ends({"pickup_city": "Boston", "dropoff_city": "Boston"}) == []
    assert not lt._no_value("NA", {"type": "string", "description": "Region."}, "sales in north america")
    assert not lt._no_value("TBD", {"type": "string", "description": "Venue."}, "venue to be determined")
    params = {
        "type": "object",
        "properties": {"special_requests": {"type": "string", "description": "Requests."}},
        "required": ["special_requests"],
    }
    booked = [MetonaMessage(role="user", content="Book Nopa for two at 7, no special requests", timestamp=1)]
    assert lt.made_up({"special_requests": "None"}, params, booked) == []  # capitalised: the absence the user gave
    schema = {"type": "object", "properties": {"attendees": {"type": "array"}}}
    people = '{"attendees": ["ana@acme.com", "raj@acme.com", "ana@acme.com", "raj@acme.com"'
    assert lt.looping_list(people, schema, schema, "a meeting with Ana and Raj") is None  # people: never left out
    weather = defs(
        {**tool("get_current_weather", "location"), "description": "Weather."},
        {**REVERSE_GEOCODE, "name": "get_elevation"},
    )
    assert lt.takes_the_coordinates(weather[0], {"location": "48.85, 2.35"}, weather) is None  # only "get" alike
    explain = defs({**tool("explain_query", "query"), "description": "EXPLAIN a SELECT statement."})[0]
    read, write = defs(READ_QUERY, WRITE_QUERY)
    assert lt.takes_the_statement(explain, {"query": "DELETE FROM t"}, [explain, read, write]) is None
    quoted = "WITH a AS (SELECT 'insert here' AS x FROM t) SELECT * FROM a"
    assert lt._statement_verb(quoted) == "SELECT"
    assert lt.takes_the_statement(read, {"query": quoted}, [read, write]) is None
    reverse = defs(REVERSE_GEOCODE)[0]
    for more in ("Find the coordinates of Zermatt and get me the forecast there", "查一下珠峰大本营坐标处的海拔"):
        assert not lt.asks_its_inputs(reverse, [MetonaMessage(role="user", content=more, timestamp=1)]), more

    def opposed(definition: dict[str, Any], text: str) -> bool:
        return lt.opposed(defs(definition)[0], [MetonaMessage(role="user", content=text, timestamp=1)])

    assert not opposed(tool("unlock_screen"), "Lock screen won't go away after the update")
    assert not opposed({**tool("pkg"), "description": "Uninstall or install a package."}, "Install numpy")
    assert opposed({**tool("unfollow_user"), "description": "Unfollow a user you follow."}, "Follow @ana please")


def test_a_command_no_offered_tool_does_calls_nothing() -> None:
    """A request that opens by commanding a deed where every offered tool only reads and none speaks of doing it
    ("帮我把…那张票退掉" offered 12306's ticket search: a blind set of other people's tools) is answered:
    :func:`localtools.none_does_it`. A tool that may act (a review: "Book an Uber" → ``uber_request_ride``), one
    that speaks of the deed under another word (cancel → delete, book → reserve), "send me" or a sending to nobody
    (show me), a noun (订单, "Transfer history"), a relative clause (买的), a question that asks for no deed and a
    noun inside 把's clause are not judged."""
    tickets = [
        _named("get_tickets", "查询12306余票信息。"),
        _named("get_station_code_of_citys", "查询城市的车站代码。"),
    ]
    shop = [_named("search_products", "Search the catalog."), _named("get_order", "Get an order's status.")]
    weather = [_named("get_current_weather", "Get the current weather in a location.")]
    assert lt.none_does_it(tickets, "帮我把昨天在12306上买的那张 G105 的票退掉。")
    assert lt.none_does_it(tickets, "帮我订一张下周五从上海飞成都的机票")
    assert lt.none_does_it(shop, "帮我把昨天买的那个订单退掉"), "买的 is a relative clause, 订单 a noun: 退"
    assert lt.none_does_it(shop, "Cancel order 123")
    assert lt.none_does_it(weather, "Can you send to Mom an Email saying we should go out on Friday?")
    assert lt.none_does_it(weather, "Please book me a table for two at 7")
    assert not lt.none_does_it([*shop, _named("cancel_order", "Cancel an order.")], "Cancel order 123"), "it acts"
    assert not lt.none_does_it([_named("uber_request_ride", "Request a ride.")], "Book an Uber to JFK at 6am")
    assert not lt.none_does_it([_named("find_trains", "Find trains; reserve seats.")], "Book a train to Boston")
    assert not lt.none_does_it(
        [*shop, _named("list_orders", "List orders; a cancelled one is deleted.")], "Cancel order 9"
    )
    assert not lt.none_does_it([_named("read_file", "Read a file.")], "Please send me the contents of notes.txt")
    assert not lt.none_does_it([_named("read_file", "Read a file.")], "Send the contents of todo.md.")
    assert not lt.none_does_it([_named("get_transfers", "List transfers.")], "Transfer history for March, please.")
    assert not lt.none_does_it(shop, "What is the status of order 123?"), "no command"
    assert not lt.none_does_it(shop, "退款到账了吗？"), "a question asking no deed"
    assert not lt.none_does_it(shop, "帮我把已取消订单列出来"), "取消 inside the clause's noun"
    assert not lt.none_does_it(tickets, "帮我查一下明天北京到上海的票"), "no such verb"


def test_what_only_a_call_can_carry_left_out_of_it_is_named() -> None:
    """An id, a version, a timestamp or a quoted text the request states, that the picked call holds nowhere and
    has no argument for while another offered tool has ("…的 v1.30.0 这个 release…" → ``list_releases``, beside
    ``get_release_by_tag``), sends the decision back to the other tools: :func:`localtools.left_unsaid`. Held in
    another form (a version without its v, a permalink's digits), a quote the call rewrote, ordinals, quantities,
    dotted dates, a request of several steps, a tool on a file, or no other tool to carry it: nothing."""

    def made(name: str, *props: str) -> MetonaToolDef:
        (one,) = defs(tool(name, props[0]))
        schema = {
            "type": "object",
            "properties": {p: {"type": "string", "description": p} for p in props},
            "required": [props[0]],
        }
        return one.model_copy(update={"parameters": type(one.parameters).model_validate(schema)})

    releases = made("list_releases", "owner", "repo", "page")
    by_tag = made("get_release_by_tag", "owner", "repo", "tag")
    both = [releases, by_tag]
    asked = "kubernetes/kubernetes 的 v1.30.0 这个 release 具体写了些什么？"
    assert lt.left_unsaid(releases, {"owner": "kubernetes", "repo": "kubernetes"}, asked, both) == ["v1.30.0"]
    assert lt.left_unsaid(releases, {"owner": "kubernetes", "repo": "kubernetes"}, asked, [releases]) == []
    assert lt.left_unsaid(by_tag, {"owner": "k", "repo": "k", "tag": "1.30.0"}, asked, both) == [], "without its v"
    post = made("slack_post_message", "channel_id", "text")
    react = made("slack_add_reaction", "channel_id", "timestamp", "reaction")
    said = "给频道 C0ABCDEF12 里时间戳为 1699999999.000200 的那条消息加个 thumbsup 表情"
    assert lt.left_unsaid(post, {"channel_id": "C0ABCDEF12", "text": "👍"}, said, [post, react]) == [
        "1699999999.000200"
    ]
    link = "React with eyes to https://acme.slack.com/archives/C0ABCDEF12/p1699999999000200"
    ts = {"channel_id": "C0ABCDEF12", "timestamp": "1699999999.000200", "reaction": "eyes"}
    assert lt.left_unsaid(react, ts, link, [post, react]) == [], "a permalink's digits"
    reader = made("retrieve_a_comment", "block_id")
    writer = made("create_a_comment", "page_id", "rich_text")
    leave = 'Leave a comment on page 59833787-2cf9 saying "Looks good to me, ship it".'
    assert lt.left_unsaid(reader, {"block_id": "59833787-2cf9"}, leave, [reader, writer]) == [
        "Looks good to me, ship it"
    ]
    rewritten = {"page_id": "59833787-2cf9", "rich_text": "LGTM, ship it!"}
    assert lt.left_unsaid(writer, rewritten, leave, [reader, writer]) == [], "a quote the call rewrote"
    plain = "Releases of acme/api on the 5th, 298K, 440Hz, 2023.10.1, CO2"
    assert lt.left_unsaid(releases, {"owner": "acme", "repo": "api"}, plain, both) == []
    steps = "List the releases of acme/api and tag v2.0.1 as latest"
    assert lt.left_unsaid(releases, {"owner": "acme", "repo": "api"}, steps, both) == [], "the next step's"
    (reader_file,) = defs(tool("read_file", "path"))
    copy = "Copy notes-2024a.txt to draft v2.0.1"
    assert lt.left_unsaid(reader_file, {"path": "notes-2024a.txt"}, copy, [reader_file, by_tag]) == []


def test_a_text_to_translate_or_reword_is_written_by_the_model_itself() -> None:
    """A request that holds a text and asks for it translated, proofread or reworded, offered no tool that does
    so, is answered: :func:`localtools.rewords_it_itself` ("帮我把这段英文邮件翻成中文…：'Dear all, …'" had sent
    the translation with ``send_email``). Not without the text in the request, with a file named, a step after it
    or a saving, nor beside a tool that translates."""
    mail = [_named("send_email", "Send an email."), _named("draft_email", "Draft an email.")]
    assert lt.rewords_it_itself(
        mail, "帮我把这段英文邮件翻成中文，语气正式一点：'Dear all, the launch moved to next Monday.'"
    )
    assert lt.rewords_it_itself(mail, "Translate 'good morning' into Japanese.")
    assert lt.rewords_it_itself(mail, "帮我把这段话润色一下：“这个项目我们搞了挺久了。”")
    assert not lt.rewords_it_itself(mail, "Translate my last email into French"), "no text given"
    assert not lt.rewords_it_itself(mail, "把 notes.md 翻译成英文：第一段"), "a file named"
    assert not lt.rewords_it_itself(mail, "Translate 'hi' into French, then email it to ann@example.com")
    assert not lt.rewords_it_itself(mail, "把“你好”翻译成英文，保存到文件里")
    assert not lt.rewords_it_itself([_named("translate_text", "Translate a text.")], "Translate 'hi' into French")


def test_from_memory_and_a_negated_ask_read_as_answer_from_knowledge() -> None:
    """ "Without running anything, from memory: what's the JQL…?" and "不用帮我查，你就凭印象大概说说…？" ask for
    the answer from what the model knows (the 帮我 of a look-up told not to be made asks nothing); "Search my
    memory for…" and a negated look-up beside a command do not."""
    assert lt.from_knowledge("Without running anything, from memory: what's the JQL for issues updated this week?")
    assert lt.from_knowledge("不用帮我查，你就凭印象大概说说，从北京开车到天津一般要多久？")
    assert not lt.from_knowledge("Search my memory for the wifi password?")
    assert not lt.from_knowledge("Can you get Alice's observations from memory?")
    assert not lt.from_knowledge("不用帮我查了，直接把灯关了？")
    assert not lt.from_knowledge("不用搜了，帮我打开客厅的灯？")
    assert lt.from_knowledge("Don't look it up, just curious: who founded Redis?")  # "just curious" asks nothing
    assert lt.from_knowledge("No need to search - just off the top of your head, what is a BibTeX @inproceedings?")
    assert not lt.from_knowledge("No need to search, just offload the data to S3?")


def test_a_quoted_word_is_no_id_that_keeps_a_question_from_the_models_knowledge() -> None:
    """A quoted word asks about the word ("From your knowledge, what does "idempotent" mean?"); an id, quoted or not,
    still keeps the question for a tool."""
    assert lt.from_knowledge('From your knowledge, what does "idempotent" mean?')
    assert lt.from_knowledge("凭你的经验，“幂等”这个词在接口设计里是什么意思？")
    assert not lt.from_knowledge("From your knowledge, what is the status of ENG-42?")
    assert not lt.from_knowledge('From your knowledge, what is the status of "ENG-42"?')


def test_a_described_choice_of_a_chinese_request_and_a_named_language_code_are_kept() -> None:
    """A free string of a Chinese request that the argument's description offers as a choice ("按发布时间排" →
    ``order: "date"`` of "such as relevance or date") is kept as an enum's choice is, and a language's code whose
    language the request names ("the spanish transcript" → ``language: "es"``); an English request's unsaid choice
    still goes, and so does a code of a language nobody named."""
    params = {
        "type": "object",
        "properties": {
            "videoId": {"type": "string"},
            "language": {"type": "string", "description": "Language code for the transcript"},
            "order": {"type": "string", "description": "Sort order for results, such as relevance or date"},
        },
        "required": ["videoId"],
    }
    english = request(messages=_asking("grab the spanish transcript of video kJQP7kiw5Fk")).messages
    called = {"videoId": "kJQP7kiw5Fk", "language": "es", "order": "date"}
    assert lt.unasked(called, params, english) == {"videoId": "kJQP7kiw5Fk", "language": "es"}
    chinese = request(messages=_asking("在 YouTube 上搜一下 Rust 教程视频，按发布时间排")).messages
    assert lt.unasked(called, params, chinese) == {"videoId": "kJQP7kiw5Fk", "order": "date"}
    other = request(messages=_asking("grab the transcript of video kJQP7kiw5Fk")).messages
    assert lt.unasked(called, params, other) == {"videoId": "kJQP7kiw5Fk"}


_SHOT = {
    **tool("browser_take_screenshot", "filename"),
    "description": "Take a screenshot of the current page.",
    "parameters": {
        "type": "object",
        "properties": {
            "type": {"type": "string", "enum": ["png", "jpeg"], "description": "Image format"},
            "fullPage": {"type": "boolean", "description": "The full scrollable page"},
            "filename": {"type": "string", "description": "File name to save the screenshot to."},
        },
    },
}
_HISTORY = {
    "type": "object",
    "properties": {
        "alarm_name": {"type": "string"},
        "start_time": {"type": "string", "description": "ISO 8601 start"},
        "end_time": {"type": "string", "description": "ISO 8601 end"},
        "time_zone": {"type": "string"},
        "max_items": {"type": "integer"},
    },
    "required": ["alarm_name"],
}


def test_what_the_request_settles_for_an_argument_the_call_left_out_is_found() -> None:
    """A date after "from" for the argument that starts a span and one after "to" for the one that ends it, a file's
    name after "named" for the output file argument, a path things start with for a prefix, a quoted text after
    "备注写" for the text argument, a number next to a word of its argument's name; not a date that is what the
    request is about, one held in another form, an input file, a quoted name, a number beside a word that merely
    begins with the argument's, nor anything the call holds already."""
    asked = "Pull the history for alarm prod-5xx from 2025-06-10 00:00 to June 11, 2025 00:00 UTC"
    found = lt.dropped_statements(_HISTORY, {"alarm_name": "prod-5xx"}, asked)
    assert found == {"start_time": [(2025, 6, 10)], "end_time": [(2025, 6, 11)]}
    assert lt.dropped_statements(_HISTORY, {"alarm_name": "prod-5xx", "start_time": "2025-06-10T00:00:00Z"},
                                 asked) == {"end_time": [(2025, 6, 11)]}  # fmt: skip
    assert lt.dropped_statements(_HISTORY, {"alarm_name": "x"}, "History of alarm x since 2025-06-10") == {
        "start_time": [(2025, 6, 10)]
    }
    held = {"alarm_name": "x", "start_time": "06/10/2025", "end_time": "2025-06-11"}
    assert lt.dropped_statements(_HISTORY, held, asked) == {}
    for text in (  # a review's (2026-12-07)
        "History of alarm x, where Bob said the deadline is 2025-06-30",
        "alarm x, the last 20 please",
        "alarm x for the 27 countries",
        "alarm x on March 19, 2024, max items",
        "History of alarm x; Decision 2, 2024 applies",
    ):
        assert lt.dropped_statements(_HISTORY, {"alarm_name": "x"}, text) == {}, text
    assert lt.dropped_statements(_HISTORY, {"alarm_name": "x"}, "alarm x, max 20 items") == {"max_items": [20]}
    shot: dict[str, Any] = _SHOT["parameters"]
    said = "把当前这个页面整页截个长图，存成 jpeg，文件名就叫 pricing-page.jpeg"
    assert lt.dropped_statements(shot, {"type": "jpeg", "fullPage": True}, said) == {"filename": ["pricing-page.jpeg"]}
    assert lt.dropped_statements(shot, {"type": "jpeg", "filename": "pricing-page.jpeg"}, said) == {}
    assert lt.dropped_statements(shot, {"type": "png"}, "a screenshot like logo.png but blue") == {}
    groups = {
        "type": "object",
        "properties": {"region": {"type": "string"}, "log_group_name_prefix": {"type": "string"}},
    }
    said = "东京区域（ap-northeast-1）里名字以 /aws/lambda/order- 开头的日志组都列一下"
    assert lt.dropped_statements(groups, {"region": "ap-northeast-1"}, said) == {
        "log_group_name_prefix": ["/aws/lambda/order-"]
    }
    customer = {
        "type": "object",
        "properties": {"id": {"type": "string"}, "note": {"type": "string"}},
        "required": ["id"],
    }
    said = "客户 6789012345 是批发商，备注写「批发客户，月结」"
    assert lt.dropped_statements(customer, {"id": "6789012345"}, said) == {"note": ["批发客户，月结"]}
    assert lt.dropped_statements(customer, {"id": "T-12"}, 'Mark "Fix login bug" (T-12) as done') == {}
    roe = {"type": "object", "properties": {"net_income": {"type": "number"}, "dividends_paid": {"type": "number"}}}
    said = "ROE for net income $2,000,000, equity $10,000,000 and dividends paid of $200,000"
    assert lt.dropped_statements(roe, {"net_income": 2000000}, said) == {"dividends_paid": [200000]}
    assert lt.with_dropped({"a": 1}, {"a": 2, "start_time": "2025-06-11"}, {"start_time": [(2025, 6, 10)]}) == {"a": 1}
    slashed = lt.dropped_statements(_HISTORY, {"alarm_name": "x"}, "history of alarm x from 04/05/2025 on")
    assert slashed == {"start_time": [(2025, 4, 5), (2025, 5, 4)]}  # either reading of a slashed date


async def test_an_argument_the_call_left_out_is_written_again_and_only_what_the_request_states_is_taken() -> None:
    """The first writing left ``filename`` out: the step is run once more with it required, and its value is taken
    as it holds the name the request gave; a second writing that makes something else up is not taken."""
    ask = _asking("Full-page jpeg screenshot please, file name pricing-page.jpeg")
    runtime = ScriptedRuntime(
        ['browser_take_screenshot"'],
        ['{"type": "jpeg", "fullPage": true}'],
        ['{"type": "png", "fullPage": true, "filename": "pricing-page.jpeg"}'],
    )
    response, _ = await run(runtime, request(messages=ask, tools=[_SHOT]))
    assert [(c.name, c.args) for c in response.tool_calls or ()] == [
        ("browser_take_screenshot", {"type": "jpeg", "fullPage": True, "filename": "pricing-page.jpeg"})
    ]
    assert "filename" in runtime.payloads[-1]["json_schema"]["required"]
    runtime = ScriptedRuntime(
        ['browser_take_screenshot"'], ['{"type": "jpeg", "fullPage": true}'], ['{"type": "jpeg", "filename": "a.png"}']
    )
    response, _ = await run(runtime, request(messages=ask, tools=[_SHOT]))
    assert [c.args for c in response.tool_calls or ()] == [{"type": "jpeg", "fullPage": True}]


def test_thanks_and_greetings_alone_call_nothing() -> None:
    """Thanks, praise or a greeting alone is answered; not with a request, a question, a name, a number, nor a
    reply to the assistant's own question, nor a bare "ok" (a yes to what it offered)."""
    for text in (
        "lol that screenshot came out perfect, thanks a ton",
        "Thanks for your help today!",
        "hi there",
        "好的，知道了，谢谢你！今天就先这样。",
        "谢谢，辛苦了",
        "thanks!! those results were exactly what I needed",
    ):
        assert lt.only_social(request(messages=_asking(text)).messages), text
    for text in (
        "Thanks! Now do the same for Berlin",
        "thanks, what's the weather in Paris?",
        "Great, thanks. The file is at /tmp/x.md",
        "thanks, Berlin",
        "Reverse say hi",
        "谢谢，再帮我查一下上海",
        "ok",
        "好的",
        "Thanks, but the date is wrong",
        "thanks, that was exactly what I needed. now delete the old ones",
        "perfect, mark it done",  # a review's (2026-12-07): a request beside the praise
        "hi, weather in berlin",
        "Weather in Nice",
        "hello world in python",
        "nice, tokyo too",
        "cool and tomorrow",
        "谢谢，那明天的天气",
        "你好，几点了",
    ):
        assert not lt.only_social(request(messages=_asking(text)).messages), text
    turns = [
        {"role": "user", "content": "Clean up the old branches", "timestamp": 1},
        {"role": "assistant", "content": "Shall I delete the 3 merged branches?", "timestamp": 2},
        {"role": "user", "content": "perfect, thanks", "timestamp": 3},
    ]
    assert not lt.only_social(request(messages=turns).messages)
    turns[1]["content"] = "Want me to also email the team? I can draft it now."
    assert not lt.only_social(request(messages=turns).messages)


async def test_a_thank_you_is_answered_without_a_call() -> None:
    shot = {**tool("browser_snapshot", "ref"), "description": "Capture an accessibility snapshot of the page"}
    runtime = ScriptedRuntime(["You're welcome!"])
    ask = _asking("lol that screenshot came out perfect, thanks a ton")
    response, _ = await run(runtime, request(messages=ask, tools=[shot]))
    assert not response.tool_calls and response.content == "You're welcome!"


def test_a_request_for_another_service_than_the_tools_speak_of_calls_nothing() -> None:
    """钉钉 beside Feishu's tools, Outlook beside Gmail's: none is for the service named; a request that names the
    tools' own service too, a service named in a mail address, a word that is also a name ("some slack"), or tools
    that name no service are not read so."""
    feishu = [_named("im_v1_message_create", "发送消息。飞书/Lark 即时通讯。"), _named("im_v1_chat_list", "获取群列表")]
    gmail = [_named("search_emails", "Searches for emails using Gmail search syntax"), _named("read_email", "Read")]
    assert lt.another_service(feishu, "在钉钉的“产品研发部”群里@所有人，说今晚8点发版")
    assert lt.another_service(gmail, "看看我 Outlook 日历里明天下午有没有会")
    assert not lt.another_service(feishu, "在飞书群里@所有人，说今晚8点发版")
    assert not lt.another_service(gmail, "Find the Outlook invite Bob forwarded to my Gmail")
    assert not lt.another_service(gmail, "Find the mail from bob@outlook.com")
    assert not lt.another_service(gmail, "cut me some slack and find Bob's last email")
    assert not lt.another_service([_named("send_message", "Send a chat message")], "Post it in Slack")
    slack = [_named("slack_post_message", "Post a new message to a channel")]
    assert lt.another_service(slack, "DM Ann on Discord") and not lt.another_service(slack, "Post in Slack")
    for text in (  # a review's (2026-12-07): a service as the topic, ruled out, in a relative clause, of the user's
        "Search my inbox for the Stripe receipt",
        "Not on Slack — email it to the team instead",
        "File a bug: users can't log in with their Gmail account",
        "Play some lofi, I'm working on my GitHub PRs",
        "Add STRIPE_SECRET_KEY and AWS_REGION to the env vars",
        "Linear algebra homework due Friday, add it to my calendar",
    ):
        assert not lt.another_service(gmail, text), text
    assert lt.another_service(gmail, "search my Outlook for the lease agreement")
    microsoft = [_named("list_mail", "List messages in a Microsoft 365 mailbox")]
    assert not lt.another_service(microsoft, "Check my Outlook inbox for the invoice")


async def test_a_request_for_another_service_is_answered_without_a_call() -> None:
    search = {**tool("search_emails", "query"), "description": "Searches for emails using Gmail search syntax"}
    runtime = ScriptedRuntime(["I can only reach Gmail, not your Outlook calendar."])
    response, _ = await run(runtime, request(messages=_asking("看看我 Outlook 日历里明天下午有没有会"), tools=[search]))
    assert not response.tool_calls and response.content.startswith("I can only reach Gmail")


def test_a_long_number_written_where_a_length_goes_is_not_held() -> None:
    """ "视频任务 106916112212032 生成好了没？" picked a video generator that wrote the task's id as its ``duration``:
    the id is unsaid there, and the tool that takes a task's id is offered; a Slack timestamp still asks for a
    ``ts``, and a number held by an id argument is held."""
    generate = _named("generate_video", "Generate a video from a prompt")
    generate.parameters.properties["duration"] = generate.parameters.properties.pop("id")
    query = _named("query_video_generation", "Query a video generation task")
    query.parameters.properties["task_id"] = query.parameters.properties.pop("id")
    asked = "视频任务 106916112212032 生成好了没？"
    tools = [generate, query]
    assert lt.left_unsaid(generate, {"duration": 106916112212032}, asked, tools) == ["106916112212032"]
    assert lt.left_unsaid(query, {"task_id": "106916112212032"}, asked, tools) == []


def test_just_from_what_you_know_is_no_action_asked() -> None:
    asked = "don't search for this, just from what you already know: who founded Exa, and was it renamed?"
    assert lt.from_knowledge(asked)
    assert not lt.from_knowledge("don't search the web, just check my notes: what's the wifi password?")


def test_a_call_sent_back_for_what_it_left_unsaid_goes_to_the_tools_that_can_carry_it() -> None:
    play = _named("play_audio", "Play an audio file")
    play.parameters.properties["input_file_path"] = play.parameters.properties.pop("id")
    query = _named("query_video_generation", "Query a video generation task")
    query.parameters.properties["task_id"] = query.parameters.properties.pop("id")
    assert [t.name for t in lt.carrying(["106916112212032"], [play, query])] == ["query_video_generation"]
    assert [t.name for t in lt.carrying(["106916112212032"], [play])] == ["play_audio"]  # none can: all stay
    comment = _named("create_comment", "Comment on a page")
    comment.parameters.properties["rich_text"] = comment.parameters.properties.pop("id")
    assert [t.name for t in lt.carrying(["Looks good to me"], [comment, play])] == ["create_comment"]


def test_a_delete_no_offered_tool_does_calls_nothing() -> None:
    """ "Delete contact 12345…" offered list, read and update tools, "…帮我直接删掉吧" offered create and rename:
    nothing is called; not where a tool deletes, archives or runs a command, nor "Release notes for v2"."""
    crm = [_named("list_objects", "List objects"), _named("batch_update_objects", "Update objects in batch")]
    assert lt.none_deletes(crm, "Delete contact 12345 from HubSpot, it's a duplicate.")
    apps = [_named("create_app", "Create a new app"), _named("rename_app", "Rename an app")]
    assert lt.none_deletes(apps, "legacy-portal 这个 app 不要了，帮我直接删掉吧")
    assert lt.none_deletes(apps, "i-bp1abc123 这台ECS用不到了，帮我释放掉，别再扣费了")
    assert not lt.none_deletes([*apps, _named("destroy_app", "Destroy an app")], "Delete the legacy-portal app")
    assert not lt.none_deletes([_named("archive_card", "Archive a card")], "Remove the card 'Old ideas'")
    assert not lt.none_deletes([_named("ssh_exec", "Run a shell command on a host")], "delete /tmp/cache on web-1")
    assert not lt.none_deletes(apps, "Release notes for v2 please")
    assert not lt.none_deletes(apps, "Create an app, then delete the old one")
    assert not lt.none_deletes(apps, "先建一个新 app，然后把旧的删掉")
    for text in ("帮我恢复刚才删掉的 report.docx", "帮我释放一下内存", "Delete is greyed out on budget.xlsx, why?"):
        assert not lt.none_deletes(apps, text), text  # a review's (2026-12-07): no delete commanded
    revoke = {**tool("revoke_api_key", "key_id"), "description": "Revoke an API key"}
    assert not lt.none_deletes(defs(revoke), "Delete my API key ak_live_9f3")  # a tool that deletes by another word
    kick = {**tool("conversations_kick", "user"), "description": "Remove a user from a channel"}
    flag = {**tool("update_page", "archived"), "description": "Update a page's properties"}
    assert not lt.none_deletes(defs(flag), "Delete the Notion page Q3 plan") and not lt.none_deletes(defs(kick), "删")
    teams = _named("find_teams", "Find teams in an organization: their slug and numeric ID to aid other tool requests")
    sentry = [teams, _named("create_project", "Create a new project in Sentry")]
    assert lt.none_deletes(sentry, "delete the legacy-web project in the acme org, nobody uses it anymore")
    search = _named("search_issues", "Search issues")  # a search's query is no statement it runs
    search.parameters.properties["query"] = search.parameters.properties.pop("id")
    assert lt.none_deletes([search, *sentry], "delete the legacy-web project")
    for runner in ("read_query", "http_get", "run_command", "redis_cli", "psql"):  # runs what it is given, by its name
        assert not lt.none_deletes([_named(runner, "Does things"), *sentry], "delete the legacy-web project"), runner
    for runner in ("github_create_issue", "download_file", "list_pull_requests"):  # whole words: no runner
        assert lt.none_deletes([_named(runner, "Does things"), *sentry], "delete the legacy-web project"), runner
    cypher = _named("write_neo4j_cypher", "Execute a write Cypher query on the database")  # by what it says it runs
    assert not lt.none_deletes([cypher, *sentry], "delete the legacy-web project")
    for key, runs_it in (("sql", True), ("method", True), ("command", True), ("url", False), ("payment_method", False)):
        runs = _named("call", "Does things")  # or by an argument's name
        runs.parameters.properties[key] = runs.parameters.properties.pop("id")
        assert lt.none_deletes([runs, *sentry], "delete the legacy-web project") is not runs_it, key


TRAIT = {
    **tool("get_dominant_trait", "allele1"),
    "description": "Calculate the dominant genetic trait of an organism based on its genetic makeup.",
}
GENE_VARIANT = "What is the frequency of gene variant rs7412 in the European population?"


async def test_an_unsure_pick_the_second_opinion_says_does_not_fit_is_not_called() -> None:
    """A first pick the model gave less than :data:`lt.FITS_P` is put to the arguments model with the tool's own
    name, description and parameters (:data:`lt.FITS_PROMPT`): ``no`` leaves it for the answer, no arguments written;
    ``yes`` calls it."""
    tools = defs(TRAIT)
    runtime = ScriptedRuntime(['get_dominant_trait"'], ["It is about 8%."], score=-0.5, fits="no")
    response, _ = await run(runtime, request(messages=_asking(GENE_VARIANT), tools=tools), FavouringEmbedder("get"))
    assert not response.tool_calls and response.content == "It is about 8%."
    assert not any("json_schema" in p for p in runtime.payloads)  # nothing written for a call that is not made
    (opinion,) = runtime.fits_payloads
    assert opinion["slot"] == "arguments" and opinion["prefix"] == lt.FITS_PREFIX
    assert opinion["messages"][0]["content"] == lt.fits_prompt(tools[0])
    said = opinion["messages"][0]["content"]
    assert "get_dominant_trait" in said and "dominant genetic trait" in said and "allele1: where" in said
    assert opinion["messages"][1]["content"] == GENE_VARIANT
    runtime = ScriptedRuntime(['get_dominant_trait"'], ['{"allele1": "A"}'], score=-0.5, fits="yes")
    response, _ = await run(runtime, request(messages=_asking(GENE_VARIANT), tools=tools), FavouringEmbedder("get"))
    assert [(c.name, dict(c.args)) for c in response.tool_calls or ()] == [("get_dominant_trait", {"allele1": "A"})]
    assert len(runtime.fits_payloads) == 1


PLAY_MOVIE = {**tool("play_movie", "title"), "description": "Start playing a movie by its title."}
FIND_MOVIES = {**tool("find_movies", "genre"), "description": "Find movies to watch by genre or cast."}
CITY_FORECAST = {**tool("get_forecast", "city"), "description": "The weather forecast for a city."}
FILMS = "Any animated films with Tom Hanks I could watch tonight?"


class Near(FavouringEmbedder):
    """The texts ``near`` says yes of (given each one's place in the batch and the text) at (1, 0), every other
    text at (0, 1): cosine 1 with each other, 0 with the rest."""

    def __init__(self, near: Callable[[int, str], bool]) -> None:
        super().__init__()
        self.near = near

    def embed(self, texts: list[str]) -> np.ndarray:
        near = [self.near(i, t) for i, t in enumerate(texts)]
        return np.array([[1.0, 0.0] if n else [0.0, 1.0] for n in near], dtype=np.float32)


def movies_near() -> Near:
    """Both movie tools' summaries at cosine 1 with the request, every other text's at 0."""
    return Near(lambda i, t: i == 0 or t.startswith(("play movie", "find movies")))


async def test_an_unsure_pick_among_several_that_fits_is_put_beside_its_lookalikes() -> None:
    """A first pick the model gave less than :data:`lt.FITS_P` among several offered tools that the second opinion
    says fits is put beside the two offered tools nearest the request (:func:`lt.lookalikes`,
    :data:`lt.CHOOSE_PROMPT`): the tool the arguments model names is called, its own arguments written; ``none``
    leaves the answer. Its ``no`` still leaves the answer, no choice asked; one tool offered is asked about alone."""
    tools = defs(PLAY_MOVIE, FIND_MOVIES, CITY_FORECAST)
    asked = request(messages=_asking(FILMS), tools=tools)
    runtime = ScriptedRuntime(['play_movie"'], ['{"genre": "animated"}'], score=-0.5, choose="find_movies")
    response, _ = await run(runtime, asked, movies_near())
    assert [(c.name, dict(c.args)) for c in response.tool_calls or ()] == [("find_movies", {"genre": "animated"})]
    fits, choice, again = runtime.fits_payloads
    assert fits["prefix"] == lt.FITS_PREFIX and fits["messages"][0]["content"] == lt.fits_prompt(tools[0])
    assert choice["slot"] == "arguments" and choice["prefix"] == lt.CHOOSE_PREFIX
    assert choice["messages"][0]["content"] == lt.choose_prompt(defs(PLAY_MOVIE, FIND_MOVIES, CITY_FORECAST))
    assert choice["messages"][1:] == fits["messages"][1:] == [{"role": "user", "content": FILMS}]
    assert choice["regex"] == "(play_movie|find_movies|get_forecast|none)", "the pick first, the nearest next"
    assert again["messages"][0]["content"] == lt.choose_prompt(defs(CITY_FORECAST, FIND_MOVIES, PLAY_MOVIE))
    assert again["messages"][1:] == choice["messages"][1:], "a lookalike named: asked again, the order reversed"
    (written,) = [p for p in runtime.payloads if "json_schema" in p]
    assert "find_movies: Find movies" in written["messages"][0]["content"], "the arguments of the tool it named"
    runtime = ScriptedRuntime(['play_movie"'], ["Try Toy Story."], score=-0.5, fits="no", choose="find_movies")
    response, _ = await run(runtime, asked, movies_near())
    assert not response.tool_calls and response.content == "Try Toy Story."
    assert [p["prefix"] for p in runtime.fits_payloads] == [lt.FITS_PREFIX], "no: no choice asked"
    choices = ["find_movies", "play_movie"]  # named in the first order only: the pick stays
    runtime = ScriptedRuntime(['play_movie"'], ['{"title": "animated films"}'], score=-0.5, choose=choices)
    response, _ = await run(runtime, asked, movies_near())
    assert [(c.name, dict(c.args)) for c in response.tool_calls or ()] == [("play_movie", {"title": "animated films"})]
    assert len(runtime.fits_payloads) == 3
    runtime = ScriptedRuntime(['play_movie"'], ['{"title": "animated films"}'], score=-0.5, choose="play_movie")
    response, _ = await run(runtime, asked, movies_near())
    assert [c.name for c in response.tool_calls or ()] == ["play_movie"]
    assert len(runtime.fits_payloads) == 2, "the pick named: not asked again"
    runtime = ScriptedRuntime(['play_movie"'], ["Try Toy Story."], score=-0.5, choose=lt.CHOOSE_NONE)
    response, _ = await run(runtime, asked, movies_near())
    assert not response.tool_calls and response.content == "Try Toy Story.", "none: the answer"
    assert not any("json_schema" in p for p in runtime.payloads)
    assert len(runtime.fits_payloads) == 2, "none: not asked again"
    runtime = ScriptedRuntime(['play_movie"'], ['{"title": "animated films"}'], score=-0.5, choose="find_movies")
    response, _ = await run(runtime, request(messages=_asking(FILMS), tools=defs(PLAY_MOVIE)), movies_near())
    assert [c.name for c in response.tool_calls or ()] == ["play_movie"]
    assert [p["prefix"] for p in runtime.fits_payloads] == [lt.FITS_PREFIX], "one tool offered: asked alone"
    runtime = ScriptedRuntime(['play_movie"'], ['{"title": "animated films"}'], score=-0.5, choose="find_movies")
    response, _ = await run(runtime, asked, FavouringEmbedder("play movie"))
    assert [c.name for c in response.tool_calls or ()] == ["play_movie"]
    assert [p["prefix"] for p in runtime.fits_payloads] == [lt.FITS_PREFIX], "no other tool near it: asked alone"


OBJECTS = {**tool("find_objects", "image_url"), "description": "Identify the objects in an image."}
SENTIMENT = {**tool("text_sentiment", "text"), "description": "Analyze the sentiment of a text."}
CAPTION = {**tool("caption_image", "image_url"), "description": "Write a caption for an image."}
TWO_ASKS = "Identify objects in my backyard image backyard.jpg and analyze the sentiment of my journal entry."


def images_near() -> Near:
    """Texts about an image or objects near each other (a part of the request too), every other text far."""
    return Near(lambda _, t: "image" in t.lower() or "object" in t.lower())


async def test_a_request_that_asks_several_things_is_judged_again_on_the_part_nearest_the_pick() -> None:
    """The second opinion's ``no`` of an unsure pick on a request that asks several things is asked again of the
    part of it nearest the pick (:func:`lt.request_parts`): ``yes`` there, the pick is called; a request that asks one
    thing is not asked again."""
    tools = defs(OBJECTS, SENTIMENT)
    runtime = ScriptedRuntime(['find_objects"'], ['{"image_url": "backyard.jpg"}'], score=-0.5, fits=["no", "yes"])
    response, _ = await run(runtime, request(messages=_asking(TWO_ASKS), tools=tools), images_near())
    assert [(c.name, dict(c.args)) for c in response.tool_calls or ()] == [
        ("find_objects", {"image_url": "backyard.jpg"})
    ]
    whole, part = runtime.fits_payloads
    assert whole["messages"][-1]["content"] == TWO_ASKS
    assert part["messages"][-1]["content"] == "Identify objects in my backyard image backyard.jpg"
    assert part["messages"][0] == whole["messages"][0]
    runtime = ScriptedRuntime(['find_objects"'], ["It shows a lawn."], score=-0.5, fits=["no", "no"])
    response, _ = await run(runtime, request(messages=_asking(TWO_ASKS), tools=tools), images_near())
    assert not response.tool_calls and response.content == "It shows a lawn."
    assert len(runtime.fits_payloads) == 2
    one = "What objects are usually in a backyard image?"
    runtime = ScriptedRuntime(['find_objects"'], ["Lawns, trees."], score=-0.5, fits=["no", "yes"])
    response, _ = await run(runtime, request(messages=_asking(one), tools=tools), images_near())
    assert not response.tool_calls and response.content == "Lawns, trees."
    assert len(runtime.fits_payloads) == 1, "one thing asked: no second asking"
    tools = defs(OBJECTS, SENTIMENT, CAPTION)
    runtime = ScriptedRuntime(
        ['find_objects"'], ['{"image_url": "backyard.jpg"}'], score=-0.5, choose=["none", "find_objects"]
    )
    response, _ = await run(runtime, request(messages=_asking(TWO_ASKS), tools=tools), images_near())
    assert [c.name for c in response.tool_calls or ()] == ["find_objects"]
    fits, whole, part = runtime.fits_payloads
    assert fits["prefix"] == lt.FITS_PREFIX and whole["prefix"] == part["prefix"] == lt.CHOOSE_PREFIX
    assert whole["messages"][-1]["content"] == TWO_ASKS, "none of them for the whole: asked of the part"
    assert part["messages"][-1]["content"] == "Identify objects in my backyard image backyard.jpg"


def test_a_choice_of_options_holds_each_option_at_most_once() -> None:
    """An array argument whose items are one of an enum is written with no more items than the enum has values
    (or its own ``maxItems``, if fewer): "field goal %" and "free throw %" had been written over and over."""
    details = {"type": "array", "items": {"type": "string", "enum": ["field goal %", "free throw %"]}}
    declared = {
        "type": "object",
        "properties": {"details": details, "ids": {"type": "array", "items": {"type": "string"}}},
    }
    schema = lt.arguments_schema(declared)
    assert schema["properties"]["details"]["maxItems"] == 2 and "maxItems" not in schema["properties"]["ids"]
    schema = lt.arguments_schema({**declared, "properties": {"details": {**details, "maxItems": 1}}})
    assert schema["properties"]["details"]["maxItems"] == 1
    schema = lt.arguments_schema({**declared, "properties": {"ids": {"type": "array", "items": {}, "maxItems": 5}}})
    assert schema["properties"]["ids"]["maxItems"] == 5


def test_the_parts_of_a_request_are_those_that_ask() -> None:
    assert lt.request_parts(TWO_ASKS) == [
        "Identify objects in my backyard image backyard.jpg",
        "analyze the sentiment of my journal entry.",
    ]
    assert lt.request_parts("How far is Lyon from Paris, and how long is the drive?") == [
        "How far is Lyon from Paris",
        "how long is the drive?",
    ]
    assert lt.request_parts("Plan my week. Also, I need the forecast for Oslo.") == [
        "Plan my week.",
        "Also, I need the forecast for Oslo.",
    ]
    assert lt.request_parts("查一下订单 1024 的状态，另外告诉我退款进度") == [
        "查一下订单 1024 的状态",
        "另外告诉我退款进度",
    ]
    assert lt.request_parts("What's the weather in Paris, France?") == []
    assert lt.request_parts("I have a rectangle 5 by 3. What is its perimeter?") == [], "a statement, then one ask"
    assert lt.request_parts("Find flights from Oslo and Bergen to Rome.") == [], "'and' between names"
    assert lt.asking_only([{"role": "user", "content": "a and b"}], "a") == [{"role": "user", "content": "a"}]


def test_a_lookalike_the_picks_own_checks_refuse_is_not_taken() -> None:
    """A lookalike the choice names is judged as the pick was before its second opinion (:func:`lt.refused`): a tool
    that changes things for a how-to question, an action for a question, is not taken (the pick stays)."""
    create = defs({**tool("create_index", "sql"), "description": "Create an index on a table."})[0]
    listing = defs({**tool("list_indexes", "table"), "description": "List the indexes on a table."})[0]
    how = request(messages=_asking("How do I create an index on users.email?")).messages
    assert lt.refused(create, how) and not lt.refused(listing, how)
    assert not lt.refused(create, request(messages=_asking("Create an index on users.email")).messages)


def test_a_second_opinions_labels_are_matched_literally() -> None:
    assert lt.label_regex(["yes", "no"]) == "(yes|no)"
    assert lt.label_regex(["cmd.run", "a+b", "none"]) == "(cmd\\.run|a\\+b|none)"


def test_lookalikes_are_the_pick_then_the_nearest_others() -> None:
    tools = defs(CITY_FORECAST, PLAY_MOVIE, FIND_MOVIES, TRAIT)
    near = {"get_forecast": 0.1, "play_movie": 0.5, "find_movies": 0.7, "get_dominant_trait": 0.4}
    assert [t.name for t in lt.lookalikes(tools[1], tools, near)] == ["play_movie", "find_movies", "get_dominant_trait"]
    assert [t.name for t in lt.lookalikes(tools[1], tools[1:2], near)] == ["play_movie"]
    near = {**near, "find_movies": 0.5 - lt.LOOKALIKE_MARGIN + 0.01, "get_dominant_trait": 0.15}
    assert [t.name for t in lt.lookalikes(tools[1], tools, near)] == ["play_movie", "find_movies", "get_dominant_trait"]
    near = {**near, "find_movies": 0.5 - lt.LOOKALIKE_MARGIN - 0.01}
    assert [t.name for t in lt.lookalikes(tools[1], tools, near)] == ["play_movie"], "none about as near: the pick"


async def test_a_sure_pick_is_not_second_guessed_whether_it_fits() -> None:
    """A pick the model gave at least :data:`lt.FITS_P`, or made with the larger model switched off (the smaller
    one's yes and no are not trusted), is called without the second opinion."""
    sure = math.log(lt.FITS_P) + 0.01
    asked = request(messages=_asking(GENE_VARIANT), tools=defs(TRAIT))
    runtime = ScriptedRuntime(['get_dominant_trait"'], ['{"allele1": "A"}'], score=sure, fits="no")
    response, _ = await run(runtime, asked, FavouringEmbedder("get"))
    assert [c.name for c in response.tool_calls or ()] == ["get_dominant_trait"] and not runtime.fits_payloads
    runtime = ScriptedRuntime(['get_dominant_trait"'], ['{"allele1": "A"}'], score=-0.5, fits="no")
    config = ProviderConfig(
        provider_id="local", preset="local", protocol="local", base_url="local://embedded",
        options={"arguments_model": "same"},
    )  # fmt: skip
    adapter = LocalAdapter(config, runtime=runtime, embedder=FavouringEmbedder("get"))
    response = await adapter.send_stream(asked, lambda e: None)
    assert [c.name for c in response.tool_calls or ()] == ["get_dominant_trait"] and not runtime.fits_payloads
    assert lt.fit_asked(None) and lt.fit_asked(math.log(lt.FITS_P) - 0.01) and not lt.fit_asked(sure)


async def test_a_pick_named_only_on_a_second_look_is_asked_whether_it_fits() -> None:
    """The model said ``answer`` first and named the tool on a second look: however sure that look, the pick is
    put to the second opinion, and its ``no`` leaves the answer."""
    runtime = ScriptedRuntime(['answer"'], ['get_dominant_trait"'], ["It is about 8%."], score=-0.01, fits="no")
    ask = "Calculate the frequency of gene variant rs7412 in the European population"
    response, _ = await run(runtime, request(messages=_asking(ask), tools=defs(TRAIT)), FavouringEmbedder("get"))
    assert not response.tool_calls and len(runtime.fits_payloads) == 1


async def test_the_second_opinion_on_a_pick_reads_the_conversation_it_was_made_in() -> None:
    """A "yes please" after the assistant's own question is read with that question: the second opinion is shown
    the conversation the decision was."""
    messages = [
        {"role": "user", "content": "My pea plant has alleles T and t.", "timestamp": 1},
        {"role": "assistant", "content": "Shall I work out its dominant trait?", "timestamp": 2},
        {"role": "user", "content": "yes please", "timestamp": 3},
    ]
    runtime = ScriptedRuntime(['get_dominant_trait"'], ['{"allele1": "T"}'], score=-0.5)
    response, _ = await run(runtime, request(messages=messages, tools=defs(TRAIT)), FavouringEmbedder("get"))
    assert [c.name for c in response.tool_calls or ()] == ["get_dominant_trait"]
    (opinion,) = runtime.fits_payloads
    assert [m["content"] for m in opinion["messages"][1:]] == [m["content"] for m in messages]
    assert opinion["messages"][1:] == runtime.payloads[0]["messages"][1:]  # as the decision read it


def test_an_id_the_request_spells_is_written_as_spelled() -> None:
    """ "…to the lb:season3 leaderboard" offered Redis's ``zadd`` → ``key: "season3_lb"``: a key nobody has."""
    asked = "add player kira w/ 4200 pts to the lb:season3 leaderboard"
    written = {"key": "season3_lb", "score": 4200, "member": "kira"}
    assert lt.verbatim_ids(written, asked) == {"key": "lb:season3", "score": 4200, "member": "kira"}
    assert lt.verbatim_ids({"keys": ["user_42", "x"]}, "delete user-42 now") == {"keys": ["user-42", "x"]}
    for args, text in (
        ({"key": "lb:season3"}, asked),  # as spelled
        ({"date": "2024-01-05"}, "on 05-01-2024 please"),  # digits only: another order on purpose
        ({"key": "user_42"}, "delete user-42 and user:42"),  # which of two?
        ({"url": "https://example.com"}, "open example.com"),  # parts of its own
        ({"key": "season4_lb"}, asked),  # other parts
    ):
        assert lt.verbatim_ids(args, text) == args, (args, text)


def test_a_year_written_short_is_written_whole() -> None:
    """A year the request writes after an apostrophe ("from '19") and the model copied as two digits is the whole
    year (:func:`lt.full_years`), in the argument's own type; a decade ("the '90s"), two digits the request also says
    as themselves, and an argument that is no year stay."""
    declared = {
        "type": "object",
        "properties": {
            "year": {"type": "number", "description": "The release year of the song."},
            "released": {"type": "string", "description": "The year it came out."},
            "count": {"type": "number"},
        },
    }
    asked = "Find me some Pop songs from '19 on the Ores Aixmis album."
    assert lt.full_years({"year": 19, "count": 19}, declared, asked) == {"year": 2019, "count": 19}
    assert lt.full_years({"released": "19"}, declared, "rock songs from the ’19") == {"released": "2019"}
    assert lt.full_years({"year": 85}, declared, "hits of '85") == {"year": 1985}
    assert lt.full_years({"year": 19.0}, declared, asked) == {"year": 2019}, "a whole number written as a float"
    assert lt.full_years({"year": 30}, declared, "hits of '30") == {"year": 2030}, "00-30: this century"
    terms = {
        "type": "object",
        "properties": {
            "loan_years": {"type": "number"},
            "exp_year": {"type": "string", "description": "Two-digit expiry year (YY)"},
        },
    }
    for args, text, schema in (
        ({"year": 90}, "songs of the '90s", declared),  # a decade
        ({"year": 19}, "19 songs from '19", declared),  # said as itself too
        ({"year": 2019}, "songs from '19", declared),
        ({"year": 30}, "Set it to '30' please", declared),  # a quote
        ({"loan_years": 30}, "a loan term of '30 years", terms),  # years, not a year
        ({"exp_year": "27"}, "card exp 09/'27", terms),  # two digits asked for
    ):
        assert lt.full_years(args, schema, text) == args, (args, text)


def test_a_date_written_year_first_is_written_whole() -> None:
    """Each date the model wrote year first with a one-digit month or day is the ISO date, anywhere in a one-line
    string and nested too (:func:`lt.tidy`); no real month and day, or one inside something longer, stays."""
    written = {"keyword": "AI", "date_range": "2023-10-01 to 2023-10-7", "days": ["2023-1-5"], "at": {"d": "2023-2-3"}}
    assert lt.tidy(written) == {
        "keyword": "AI",
        "date_range": "2023-10-01 to 2023-10-07",
        "days": ["2023-01-05"],
        "at": {"d": "2023-02-03"},
    }
    assert lt.tidy("2024-5-05T09:00") == "2024-05-05T09:00"
    for value in ("2023-13-7", "v2023-1-2-3", "12023-1-2"):
        assert lt.tidy(value) == value


async def test_a_call_carries_the_id_as_the_request_spells_it() -> None:
    zadd = {**tool("zadd", "key"), "description": "Add a member with a score to a sorted set"}
    ask = [{"role": "user", "content": "add player kira w/ 4200 pts to the lb:season3 leaderboard", "timestamp": 1}]
    runtime = ScriptedRuntime(['zadd"'], ['{"key": "season3_lb"}'])
    response, _ = await run(runtime, request(messages=ask, tools=[zadd]), FavouringEmbedder("sorted"))
    assert [(c.name, c.args) for c in response.tool_calls or ()] == [("zadd", {"key": "lb:season3"})]


def test_a_required_duration_is_one_the_request_states_in_the_arguments_unit() -> None:
    """ "make session:9f3 expire in 30 min" offered Redis's ``expire(name, expire_seconds)`` ran ``expire_seconds:
    18000000000000000``: the request's durations, in the argument's unit, are its only choices."""
    declared = {
        "type": "object",
        "required": ["name", "expire_seconds", "minute"],
        "properties": {
            "name": {"type": "string"},
            "expire_seconds": {"type": "number", "description": "Expire Seconds (integer)"},
            "minute": {"type": "number", "description": "Minute (integer)"},
            "count": {"type": "number"},
        },
    }
    schema = lt.arguments_schema(declared)

    def seconds(text: str) -> Any:
        return lt.in_time_units(schema, declared, text)["properties"]["expire_seconds"]

    assert seconds("make session:9f3 expire in 30 min") == {"type": "number", "enum": [1800]}
    assert seconds("让 session:9f3 一小时后过期") == {"type": "number", "enum": [3600]}
    assert seconds("expire it in 2 hours, or 3 days") == {"type": "number", "enum": [7200, 259200]}
    assert seconds("expire it in 1500 ms") == {"type": "number"}  # 1.5 s: no whole number of seconds
    assert seconds("expire it tomorrow") == {"type": "number"}  # no duration stated
    for compound in (
        "expire in an hour and a half",
        "expire in 2 hrs 30 mins",
        "一个半小时后过期",
        "1小时30分钟后过期",
    ):
        assert seconds(compound) == {"type": "number"}, compound  # two units: no one number of the request
    until = {**declared, "properties": {**declared["properties"], "expire_seconds": {
        "type": "number", "description": "Unix time in seconds"}}}  # fmt: skip
    assert lt.in_time_units(schema, until, "expire in 30 min")["properties"]["expire_seconds"] == {"type": "number"}
    at = lt.in_time_units(schema, declared, "at 5:45 run it for 45 seconds")["properties"]
    assert at["minute"] == {"type": "number"} and at["expire_seconds"] == {"type": "number", "enum": [45]}


async def test_a_required_duration_is_written_in_the_arguments_unit() -> None:
    expire = {
        **tool("expire", "name"),
        "description": "Set a timeout on a key",
        "parameters": {
            "type": "object",
            "required": ["name", "expire_seconds"],
            "properties": {"name": {"type": "string", "description": "Key"},
                           "expire_seconds": {"type": "number", "description": "Seconds (integer)"}},
        },
    }  # fmt: skip
    ask = [{"role": "user", "content": "make session:9f3 expire in 30 min", "timestamp": 1}]
    runtime = ScriptedRuntime(['expire"'], ['{"name": "session:9f3", "expire_seconds": 1800}'])
    response, _ = await run(runtime, request(messages=ask, tools=[expire]), FavouringEmbedder("timeout"))
    assert [(c.name, c.args) for c in response.tool_calls or ()] == [
        ("expire", {"name": "session:9f3", "expire_seconds": 1800})
    ]
    written = next(p for p in runtime.payloads if "json_schema" in p)["json_schema"]
    assert written["properties"]["expire_seconds"] == {"type": "number", "enum": [1800]}
