"""``responseFormat`` (IR extension, the parse chain's ``json_object`` step) mapped per vendor."""

from __future__ import annotations

from typing import Any

import pytest

from sidecar.ir import MetonaRequest
from sidecar.providers.base import ProviderConfig
from sidecar.providers.ollama import OllamaAdapter
from sidecar.providers.openai_compat import OpenAICompatAdapter

from .support import request, tool

pytestmark = pytest.mark.anyio

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def with_format(fmt: dict[str, Any] | None) -> MetonaRequest:
    data = request().model_dump(mode="json")
    if fmt is not None:
        data["responseFormat"] = fmt
    return MetonaRequest.model_validate(data)


def config(protocol: str, base_url: str) -> ProviderConfig:
    return ProviderConfig(provider_id=protocol, preset=protocol, protocol=protocol, base_url=base_url, api_key="k")


def test_the_extension_is_camel_case_on_the_wire() -> None:
    req = with_format({"type": "json_schema", "jsonSchema": SCHEMA, "name": "place"})
    assert req.response_format is not None and req.response_format.json_schema == SCHEMA
    assert req.model_dump(mode="json")["responseFormat"] == {
        "type": "json_schema",
        "jsonSchema": SCHEMA,
        "name": "place",
    }
    assert "responseFormat" not in request().model_dump(mode="json")


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        (None, None),
        ({"type": "text"}, None),
        ({"type": "json_object"}, {"type": "json_object"}),
        (
            {"type": "json_schema", "jsonSchema": SCHEMA, "name": "place"},
            {"type": "json_schema", "json_schema": {"name": "place", "schema": SCHEMA}},
        ),
        (
            {"type": "json_schema", "jsonSchema": SCHEMA},
            {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA}},
        ),
    ],
)
async def test_openai_compatible_response_format(fmt: dict[str, Any] | None, expected: Any) -> None:
    adapter = OpenAICompatAdapter(config("openai", "https://api.openai.com/v1"))
    payload = await adapter.build_payload(with_format(fmt), "gpt-4o-mini", stream=True)
    assert payload.get("response_format") == expected


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [(None, None), ({"type": "json_object"}, "json"), ({"type": "json_schema", "jsonSchema": SCHEMA}, SCHEMA)],
)
async def test_ollama_format(fmt: dict[str, Any] | None, expected: Any) -> None:
    adapter = OllamaAdapter(config("ollama", "http://127.0.0.1:11434"))
    payload = await adapter.build_payload(with_format(fmt), "llama3.2", stream=True)
    assert payload.get("format") == expected


def test_local_constrained_decoding_replaces_the_tools() -> None:
    from sidecar.providers.local import LocalAdapter, response_schema

    data = request(tools=[tool("get_weather", "city")]).model_dump(mode="json")
    data["responseFormat"] = {"type": "json_schema", "jsonSchema": SCHEMA}
    req = MetonaRequest.model_validate(data)
    schema = response_schema(req)
    assert schema == SCHEMA
    payload = LocalAdapter(config("local", "local://embedded")).payload(req, [], schema)
    assert payload["json_schema"] == SCHEMA and "tools" not in payload
    assert "JSON object" in payload["messages"][0]["content"]
    assert response_schema(with_format({"type": "json_object"})) == {"type": "object"}
