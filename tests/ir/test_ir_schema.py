"""JSON Schema generation for every IR model, and the package's public surface."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter

import sidecar.ir as ir
from sidecar.ir import IR_MODELS, MetonaResponse, MetonaToolResult, WireModel

CAMEL = re.compile(r"^[a-z][a-zA-Z0-9]*$")
MODES = ("serialization", "validation")


def object_schema(model: type[BaseModel], mode: str) -> dict[str, Any]:
    schema = TypeAdapter(model).json_schema(by_alias=True, mode=mode)  # type: ignore[arg-type]
    if "$ref" in schema:  # recursive models (MetonaParamField) are emitted as a $ref into $defs
        schema = schema["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def all_wire_models() -> set[type[BaseModel]]:
    found: set[type[BaseModel]] = set()
    todo: list[type[BaseModel]] = [WireModel]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__module__.startswith("sidecar.ir.") and sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


def test_ir_models_lists_every_ir_model_once() -> None:
    assert len(IR_MODELS) == len(set(IR_MODELS)) == 26  # 25 of the seed + MetonaResponseFormat (extension)
    assert set(IR_MODELS) == all_wire_models()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("model", IR_MODELS, ids=[m.__name__ for m in IR_MODELS])
def test_schema_is_a_real_camel_case_object(model: type[BaseModel], mode: str) -> None:
    schema = object_schema(model, mode)
    assert schema["type"] == "object"
    assert schema["title"] == model.__name__
    props = schema["properties"]
    assert set(props) == {f.alias for f in model.model_fields.values()}
    assert all(CAMEL.match(key) for key in props)
    required = {f.alias for f in model.model_fields.values() if f.is_required()}
    assert set(schema.get("required", [])) == required


@pytest.mark.parametrize("mode", MODES)
def test_optional_fields_are_optional_and_not_nullable(mode: str) -> None:
    props = object_schema(ir.MetonaMessage, mode)["properties"]
    assert props["reasoningContent"] == {
        "title": "Reasoningcontent",
        "type": "string",
        "description": "Assistant only: the thinking text (some providers need it sent back with tool calls).",
    }
    assert props["iteration"] == {"title": "Iteration", "type": "integer", "minimum": 1}
    assert props["toolResult"] == {"$ref": "#/$defs/MetonaToolResult", "description": "Tool only."}
    for key in ("reasoningContent", "toolCalls", "toolResult", "iteration", "images"):
        assert "null" not in str(props[key])
        assert "default" not in props[key]


@pytest.mark.parametrize("mode", MODES)
def test_unknown_fields_accept_anything(mode: str) -> None:
    assert "type" not in object_schema(MetonaResponse, mode)["properties"]["structuredOutput"]
    result = object_schema(MetonaToolResult, mode)
    assert "type" not in result["properties"]["result"]
    assert "result" in result["required"]


def test_enums_appear_as_string_enums() -> None:
    defs = TypeAdapter(MetonaResponse).json_schema(by_alias=True, mode="serialization")["$defs"]
    assert defs["MetonaFinishReason"] == {
        "enum": ["stop", "length", "tool_calls", "content_filter", "error"],
        "title": "MetonaFinishReason",
        "type": "string",
    }


def test_all_names_are_exported() -> None:
    assert sorted(ir.__all__) == sorted(set(ir.__all__))
    for name in ir.__all__:
        assert getattr(ir, name) is not None
    for model in IR_MODELS:
        assert model.__name__ in ir.__all__
