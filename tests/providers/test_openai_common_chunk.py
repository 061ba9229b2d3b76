"""The common OpenAI chunk is read with orjson (issue 22); whatever orjson would read differently from the json
module (NaN, lone surrogates, integers past 64 bits) or any other chunk shape is left to the json module's path."""

from __future__ import annotations

import json

import pytest

from sidecar.providers.openai_compat import _common_text

BASE = '{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[%s]}'


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (BASE % '{"index":0,"delta":{"content":"流式 \\n\\"x\\""},"finish_reason":null}', '流式 \n"x"'),
        (BASE % '{"delta":{"content":""}}', ""),
        (BASE % '{"index":0,"delta":{"content":"\\ud83d\\ude00"},"logprobs":null}', "😀"),
        ('{"choices":[{"delta":{"content":"a"}}],"error":{"message":"x"}}', "a"),  # as before: text first
    ],
)
def test_the_common_chunk_gives_its_text(data: str, text: str) -> None:
    assert _common_text(data) == text
    delta = json.loads(data)["choices"][0]["delta"]
    assert delta["content"] == text  # the json module reads the same text


@pytest.mark.parametrize(
    "data",
    [
        BASE % '{"index":0,"delta":{"content":"\\ud83d"}}',  # a lone surrogate: orjson refuses, json keeps it
        BASE % '{"index":0,"delta":{"content":"a"},"logprobs":NaN}',
        BASE % '{"index":18446744073709551616,"delta":{"content":"a"}}',  # orjson: a float
        BASE % '{"index":1,"delta":{"content":"a"}}',
        BASE % '{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}',
        BASE % '{"index":0,"delta":{"content":"a","role":"assistant"}}',
        BASE % '{"index":0,"delta":{"reasoning_content":"a"}}',
        BASE % '{"index":0,"delta":{"content":null}}',
        BASE % '{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}',
        '{"choices":[{"delta":{"content":"a"}}],"usage":{"prompt_tokens":1}}',
        '{"choices":[]}',
        '["not", "an", "object"]',
        "not json",
    ],
)
def test_any_other_chunk_is_left_to_the_json_path(data: str) -> None:
    assert _common_text(data) is None
