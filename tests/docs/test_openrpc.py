"""ipc_schema/openrpc.json: a valid OpenRPC 1.x document (the vendored meta-schema, see META_SCHEMAS.md) that lists
every method of the schema with its params by name, its result, its errors and its example. Its drift from the code
is tests/contract/test_ipc_schema_current.py's (it is one of the generated files)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
OPENRPC = json.loads((ROOT / "ipc_schema" / "openrpc.json").read_text(encoding="utf-8"))
SCHEMA = json.loads((ROOT / "ipc_schema" / "metona-sidecar.schema.json").read_text(encoding="utf-8"))


def meta_validator() -> jsonschema.Draft7Validator:
    meta = json.loads((HERE / "openrpc-meta-schema-1.14.9.json").read_text(encoding="utf-8"))
    tools = json.loads((HERE / "json-schema-tools-meta-schema-1.8.0.json").read_text(encoding="utf-8"))
    resource = Resource.from_contents(tools, default_specification=DRAFT7)
    registry = Registry().with_resources(
        [("https://meta.json-schema.tools", resource), ("https://meta.json-schema.tools/", resource)]
    )
    return jsonschema.Draft7Validator(meta, registry=registry)


def test_openrpc_validates_against_the_meta_schema() -> None:
    errors = sorted(meta_validator().iter_errors(OPENRPC), key=lambda e: list(e.absolute_path))
    assert not errors, [f"{list(e.absolute_path)}: {e.message[:200]}" for e in errors[:10]]


def test_the_meta_schema_check_can_fail() -> None:
    """The validator rejects a broken document (a method without a result, an unknown version)."""
    broken: dict[str, Any] = {**OPENRPC, "openrpc": "9.9.9", "methods": [{"name": "x", "params": []}]}
    assert list(meta_validator().iter_errors(broken))


def test_every_method_is_listed_with_its_params_result_and_errors() -> None:
    methods = {m["name"]: m for m in OPENRPC["methods"]}
    schema_methods = SCHEMA["properties"]["methods"]["properties"]
    assert set(methods) == set(schema_methods)
    defs = SCHEMA["$defs"]
    assert set(OPENRPC["components"]["schemas"]) == set(defs)
    text = json.dumps(OPENRPC)
    for ref in {part.split('"')[0] for part in text.split('"$ref": "')[1:]}:
        assert ref.startswith("#/components/schemas/") and ref.rsplit("/", 1)[-1] in defs, ref
    for name, method in methods.items():
        params = schema_methods[name]["properties"]["params"]
        model = defs[params["$ref"].rsplit("/", 1)[-1]] if "$ref" in params else params
        assert [p["name"] for p in method["params"]] == list(model.get("properties", {})), name
        assert {p["name"] for p in method["params"] if p["required"]} == set(model.get("required", [])), name
        codes = {(e["code"], e["data"]["code"]) for e in method["errors"]}
        assert (-32602, "VALIDATION_ERROR") in codes and (-32800, "REQUEST_CANCELLED") in codes, name


def test_the_questions_integrators_ask_are_answered() -> None:
    """The errors the static walk finds include those the suite sees (a walk that found nothing would pass the rest)."""
    methods = {m["name"]: m for m in OPENRPC["methods"]}
    install = {e["data"]["code"] for e in methods["plugins/install"]["errors"]}
    assert {"PLUGIN_PACKAGE_NOT_FOUND", "PLUGIN_PACKAGE_INVALID", "PLUGIN_ALREADY_INSTALLED"} <= install
    file = {(e["code"], e["data"]["code"]) for e in methods["exports/file"]["errors"]}
    assert {(404, "EXPORT_JOB_NOT_FOUND"), (400, "EXPORT_OPTIONS_INVALID"), (409, "EXPORT_FILE_NOT_READY")} <= file
    assert "stream lines" in methods["chat/stream"]["x-emits"]
