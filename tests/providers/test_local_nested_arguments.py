"""A plugin tool's nested argument schema reaches the local provider's decoder whole (the IR extension
``properties``/``required`` on MetonaParamField): the MCP tool's declaration, the wire, the arguments schema the
decoder is constrained by, the arguments prompt, and the call the adapter emits, checked against the server's own
schema. No model: the generations are scripted.

The schema is ``create_entities`` of the reference MCP server ``@modelcontextprotocol/server-memory`` (the
interface its README documents: an array of objects, each with a name, a type and an array of observations),
as its ``tools/list`` publishes it (zod → JSON Schema draft-07). None of the servers installed in tools/mcp-ref
(server-everything, mcp-server-time) has a tool with a nested argument."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from sidecar.ir import MetonaRiskLevel, MetonaToolDef
from sidecar.localmodel.jsongrammar import compact_grammar
from sidecar.mcp_host.tools import McpTool, convert_schema
from sidecar.providers import localtools as lt

from .support import request
from .test_localtools import ScriptedRuntime, run

pytestmark = pytest.mark.anyio

CREATE_ENTITIES: dict[str, Any] = {
    "type": "object",
    "properties": {
        "entities": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The name of the entity"},
                    "entityType": {"type": "string", "description": "The type of the entity"},
                    "observations": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "An array of observation contents associated with the entity",
                    },
                },
                "required": ["name", "entityType", "observations"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["entities"],
    "additionalProperties": False,
    "$schema": "http://json-schema.org/draft-07/schema#",
}
ARGS = {"entities": [{"name": "Ann_Lee", "entityType": "person", "observations": ["Prefers morning meetings"]}]}


def memory_tool(schema: dict[str, Any] = CREATE_ENTITIES) -> McpTool:
    async def never(*_: Any) -> Any:
        raise AssertionError("not called")

    return McpTool(
        plugin_id="memory",
        mcp_name="create_entities",
        description="Create multiple new entities in the knowledge graph",
        input_schema=schema,
        risk=MetonaRiskLevel.LOW,
        timeout_ms=1000,
        call=never,
    )


def test_the_declaration_carries_the_nested_schema_and_survives_the_wire() -> None:
    declared = memory_tool().declaration("memory__create_entities")
    wire = declared.model_dump(mode="json")
    entities = wire["parameters"]["properties"]["entities"]
    assert wire["parameters"]["required"] == ["entities"]
    assert entities["type"] == "array" and entities["items"]["type"] == "object"
    assert entities["items"]["required"] == ["name", "entityType", "observations"]
    inner = entities["items"]["properties"]
    assert inner["name"] == {"type": "string", "description": "The name of the entity"}
    assert inner["observations"]["type"] == "array" and inner["observations"]["items"]["type"] == "string"
    assert MetonaToolDef.model_validate(json.loads(json.dumps(wire))) == declared


def test_the_decoder_is_constrained_by_the_nested_schema() -> None:
    declared = memory_tool().declaration("memory__create_entities")
    schema = lt.arguments_schema(declared.parameters.model_dump(mode="json", exclude_none=True))
    item = schema["properties"]["entities"]["items"]
    assert item["additionalProperties"] is False and item["required"] == ["name", "entityType", "observations"]
    assert item["properties"]["observations"] == {"type": "array", "items": {"type": "string"}}
    jsonschema.validate(ARGS, schema)
    assert memory_tool().parse_args(ARGS) == ARGS  # what the decoder may write, the server accepts
    for bad in (
        {"entities": [{"name": "Ann_Lee", "entityType": "person"}]},  # a required nested key missing
        {"entities": [{**ARGS["entities"][0], "age": 3}]},  # an undeclared nested key
        {"entities": "Ann_Lee"},  # a string where the server wants an array (the IR's fallback before)
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    prompt = lt.arguments_prompt(declared)
    assert "- entities (array of object {name: string, entityType: string, observations: array of string}" in prompt


def test_an_object_that_declares_no_keys_stays_open_and_an_unexpressible_optional_key_is_left_out() -> None:
    loose = {
        "type": "object",
        "properties": {
            "filter": {"type": "object", "description": "Any filter."},
            "page": {
                "type": "object",
                "properties": {
                    "size": {"type": "integer", "description": "Page size."},
                    "cursor": {"type": ["string", "integer"], "description": "Opaque cursor."},  # a union
                },
                "required": ["size"],
            },
        },
        "required": ["filter", "page"],
    }
    params = memory_tool(loose).declaration("x").parameters.model_dump(mode="json", exclude_none=True)
    assert set(params["properties"]["page"]["properties"]) == {"size"}
    schema = lt.arguments_schema(params)
    assert schema["properties"]["filter"] == {"type": "object"}  # open: any keys
    jsonschema.validate({"filter": {"status": "open", "tags": ["a"]}, "page": {"size": 10}}, schema)


def test_one_or_many_is_an_array_and_other_unions_stay_text() -> None:
    point = {"type": "number", "minimum": -90, "maximum": 90}
    union = {
        "type": "object",
        "properties": {
            "latitude": {"anyOf": [point, {"type": "array", "items": point}], "description": "One or more."},
            "ids": {"oneOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}, {"type": "null"}]},
            "cursor": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "number"}}]},
            "tag": {  # Zotero's search by tag: one tag, several, or conditions; it had gone as text (`":["`)
                "anyOf": [
                    {"type": "array", "items": {"type": "string"}},
                    {"type": "array", "items": {"type": "object", "properties": {"tag": {"type": "string"}}}},
                    {"type": "string"},
                ],
                "description": "Tags to match",
            },
        },
        "required": ["latitude"],
    }
    params = convert_schema(union).model_dump(mode="json", exclude_none=True)["properties"]
    assert params["latitude"]["type"] == "array" and params["latitude"]["items"]["type"] == "number"
    assert params["latitude"]["description"].startswith("One or more.")
    assert params["ids"]["type"] == "array" and params["ids"]["items"]["type"] == "string"
    assert params["cursor"]["type"] == "string" and "JSON Schema" in params["cursor"]["description"]
    assert params["tag"]["type"] == "array" and params["tag"]["items"]["type"] == "string", "one or many, and more"
    assert params["tag"]["description"] == "Tags to match"
    other = {
        "type": "object",
        "properties": {
            "scope": {"anyOf": [{"const": "all"}, {"type": "array", "items": {"type": "string"}}]},
            "pick": {"anyOf": [{"enum": ["*"]}, {"type": "array", "items": {"enum": ["a", "b"]}}]},
        },
    }
    kept = convert_schema(other).model_dump(mode="json", exclude_none=True)["properties"]
    assert kept["scope"]["type"] == "string" and kept["pick"]["type"] == "string", "the one form is not an item"


def test_a_value_or_a_named_one_is_the_value_with_its_names_said() -> None:
    """Docker's ``tail: int | Literal["all"]`` had gone to the model as a free string ("Show me the last 50 lines
    of logs" → ``tail: "errors"``, a blind set of other people's tools): a number now, "all" in its hints;
    the server's own schema still judges the call (a plugin's tool validates against it)."""
    schema = {
        "type": "object",
        "properties": {
            "tail": {
                "anyOf": [{"type": "integer"}, {"const": "all", "type": "string"}],
                "default": 100,
                "description": "Number of lines to show from the end",
            },
            "mode": {"anyOf": [{"type": "string"}, {"enum": ["fast", "full"]}]},
            "both": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            "odd": {"anyOf": [{"type": "integer"}, {"const": "a, b"}]},  # a hint's comma: no named value
        },
    }
    fields = convert_schema(schema).model_dump(mode="json", exclude_none=True)["properties"]
    assert fields["tail"]["type"] == "number"
    assert fields["tail"]["description"] == 'Number of lines to show from the end (integer, or "all", default 100)'
    assert fields["mode"] == {"type": "string", "description": 'string (or "fast"|"full")'}
    assert fields["both"]["type"] == "string" and "JSON Schema" in fields["both"]["description"]  # two kinds
    assert fields["odd"]["type"] == "string" and "JSON Schema" in fields["odd"]["description"]
    tail = {"type": "object", "properties": {"tail": fields["tail"]}}  # the decoder: a number stated, or "all"
    assert lt.arguments_schema(tail, numbers=[50])["properties"]["tail"] == {
        "anyOf": [{"type": "number", "enum": [50]}, {"enum": ["all"]}]
    }
    assert lt.arguments_schema(tail)["properties"]["tail"] == {"enum": ["all"]}  # no number stated
    grammar = compact_grammar(lt.arguments_schema(tail, numbers=[50]))
    assert grammar is not None and '("50") | ("\\"all\\"")' in grammar


async def test_the_adapter_calls_a_plugin_tool_with_nested_arguments() -> None:
    declared = memory_tool().declaration("memory__create_entities").model_dump(mode="json")
    text = json.dumps(ARGS)
    runtime = ScriptedRuntime(['memory__create_entities"'], [text[i : i + 9] for i in range(0, len(text), 9)])
    ask = [{"role": "user", "content": "Remember that Ann Lee prefers morning meetings.", "timestamp": 1}]
    response, _ = await run(runtime, request(messages=ask, tools=[declared]))
    assert response.tool_calls and response.tool_calls[0].name == "memory__create_entities"
    assert response.tool_calls[0].args == ARGS
    sent = runtime.payloads[1]["json_schema"]
    assert sent["properties"]["entities"]["items"]["required"] == ["name", "entityType", "observations"]


BUSES: dict[str, Any] = {
    "type": "object",
    "properties": {
        "from_city": {"type": "string", "description": "The city to leave from, as 'City, ST'."},
        "to_city": {"type": "string", "description": "The city to go to, as 'City, ST'."},
        "num_passengers": {"type": "integer", "enum": [1, 2, 3, 4, 5], "default": 1, "description": "Travellers."},
        "seats": {"type": "integer", "enum": [1, 2, 3, 4, 5], "description": "Seats to hold."},
        "direct": {"type": "boolean", "enum": [True, False], "description": "Direct buses only."},
        "mixed": {"enum": [1, "one"], "description": "Either."},
    },
    "required": ["from_city", "to_city", "seats"],
}


def bus_tool(name: str = "find_bus", schema: dict[str, Any] = BUSES) -> McpTool:
    """A plugin's tool without trusted annotations (it needs the user's permission)."""

    async def never(*_: Any) -> Any:
        raise AssertionError("not called")

    description = "Find a bus itinerary between two cities." if schema is BUSES else "Find movies showing in a city."
    return McpTool(
        plugin_id="travel",
        mcp_name=name,
        description=description,
        input_schema=schema,
        risk=MetonaRiskLevel.MEDIUM,
        timeout_ms=1000,
        call=never,
    )


def test_a_number_or_boolean_enum_keeps_its_type_and_its_choices() -> None:
    """An integer enum became a free string (the IR's ``enum`` holds strings), and the model sent a plugin
    ``"2"`` or ``"{4}"`` for a number of passengers: it is a number now, its choices in the hints, and the
    decoder is constrained to them (an optional one to those the request states)."""
    params = convert_schema(BUSES).model_dump(mode="json", exclude_none=True)["properties"]
    hints = "Travellers. (integer, one of 1|2|3|4|5, default 1)"
    assert params["num_passengers"] == {"type": "number", "description": hints}
    assert params["direct"] == {"type": "boolean", "description": "Direct buses only."}
    assert params["mixed"]["type"] == "string" and "JSON Schema" in params["mixed"]["description"]
    declared = convert_schema(BUSES).model_dump(mode="json", exclude_none=True)
    schema = lt.arguments_schema(declared, numbers=lt.stated_numbers("for two people, with 7 bags"))
    assert schema["properties"]["seats"] == {"type": "number", "enum": [1, 2, 3, 4, 5]}
    assert schema["properties"]["num_passengers"] == {"type": "number", "enum": [2]}  # 7 is not a choice
    assert "num_passengers" not in lt.arguments_schema(declared, numbers=[7])["properties"]


async def test_the_adapter_sends_a_number_enum_as_a_number() -> None:
    declared = bus_tool().declaration("bus__find_bus").model_dump(mode="json")
    text = '{"from_city": "Miami, FL", "to_city": "Atlanta, GA", "seats": 3, "num_passengers": 2}'
    runtime = ScriptedRuntime(['bus__find_bus"'], [text])
    asked = "Find a bus from Miami, FL to Atlanta, GA for two people; hold 3 seats."
    ask = [{"role": "user", "content": asked, "timestamp": 1}]
    response, _ = await run(runtime, request(messages=ask, tools=[declared]))
    assert response.tool_calls and response.tool_calls[0].args["num_passengers"] == 2
    jsonschema.validate(response.tool_calls[0].args, BUSES)  # the server's own schema
    assert runtime.payloads[1]["json_schema"]["properties"]["num_passengers"] == {"type": "number", "enum": [2, 3]}


LOOKUP = {
    "type": "object",
    "properties": {
        "location": {"type": "string", "description": "The city, as 'City, ST'."},
        "genre": {"type": "string", "enum": ["Offbeat", "Drama", "dontcare"], "default": "dontcare"},
        "show_type": {"type": "string", "enum": ["regular", "3d", "imax", "dontcare"], "default": "dontcare"},
    },
    "required": ["location"],
}


@pytest.mark.parametrize(("name", "kept"), [("find_movies", {}), ("buy_movie_tickets", {"show_type": "regular"})])
async def test_a_look_up_plugin_tool_lets_go_of_choices_nobody_asked_for(name: str, kept: dict[str, Any]) -> None:
    """An untrusted plugin's tools all need permission; whether an unasked enum choice is let go (the default
    applies) follows the tool's name: a look-up's "Offbeat" for "a movie in Mountain View" goes, a purchase keeps
    what it was given (its default could undo what was asked)."""
    declared = bus_tool(name, LOOKUP).declaration(f"movies__{name}").model_dump(mode="json")
    assert declared["requiresPermission"]
    text = '{"location": "Mountain View, CA", "genre": "Offbeat", "show_type": "regular"}'
    runtime = ScriptedRuntime([f'movies__{name}"'], [text])
    ask = [{"role": "user", "content": "I want to see a movie in Mountain View, CA tonight.", "timestamp": 1}]
    response, _ = await run(runtime, request(messages=ask, tools=[declared]))
    assert response.tool_calls
    want = {"location": "Mountain View, CA", **({"genre": "Offbeat"} if kept else {}), **kept}
    assert response.tool_calls[0].args == want
