"""The reference's examples are tests (issue 35): every method of the schema has one in ipc_schema/examples.json,
and every example is sent, in the file's order, to ONE real sidecar; a result must validate against the method's
result schema and have the recorded answer's shape, an error must carry the recorded codes. How to add an example:
docs/contributing.md."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import ipc_examples  # noqa: E402

SCHEMA = json.loads((ROOT / "ipc_schema" / "metona-sidecar.schema.json").read_text(encoding="utf-8"))
METHODS = SCHEMA["properties"]["methods"]["properties"]
EXAMPLES = ipc_examples.load()


def test_every_schema_method_has_a_recorded_example() -> None:
    missing = sorted(set(METHODS) - set(EXAMPLES))
    assert not missing, f"methods without an example in ipc_schema/examples.json (see docs/contributing.md): {missing}"
    unknown = sorted(set(EXAMPLES) - set(METHODS))
    assert not unknown, f"examples of methods the schema does not have: {unknown}"
    for method, items in EXAMPLES.items():
        assert items, method
        for ex in items:
            assert ("result" in ex) != ("error" in ex), (
                f"{method}: record its answer (scripts/ipc_examples.py --record)"
            )
    assert next(iter(EXAMPLES)) == "initialize" and list(EXAMPLES)[-1] == "shutdown"


def test_shape_check_can_fail() -> None:
    assert ipc_examples.shape_differences({"a": 1, "b": [{"c": "x"}]}, {"a": 2, "b": [{"c": "y"}]}) == []
    assert ipc_examples.shape_differences({"a": "1"}, {"a": 1}) == ["result.a: number recorded, str answered"]
    assert ipc_examples.shape_differences({"a": 1}, {"a": 1, "b": None}) == ["result: keys ['b'] differ"]
    assert ipc_examples.shape_differences([{"x": True}], [{"x": None}]) == []


def result_validator(method: str) -> jsonschema.Draft202012Validator:
    schema = {"$defs": SCHEMA["$defs"], **METHODS[method]["properties"]["result"]}
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="module")
def replies(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, list[dict[str, Any]]]]:
    run = ipc_examples.run_on_sidecar(EXAMPLES, tmp_path_factory.mktemp("examples"))
    yield run.replies


@pytest.mark.e2e
@pytest.mark.parametrize("method", list(EXAMPLES))
def test_example_answers_as_recorded(method: str, replies: dict[str, list[dict[str, Any]]]) -> None:
    for ex, reply in zip(EXAMPLES[method], replies[method], strict=True):
        if "result" in ex:
            assert "result" in reply, f"{method} ({ex.get('title', 'main')}): {reply.get('error')}"
            errors = [e.message[:200] for e in result_validator(method).iter_errors(reply["result"])]
            assert not errors, f"{method}: the answer does not match the result schema: {errors[:5]}"
            assert not ipc_examples.shape_differences(reply["result"], ex["result"]), method
        else:
            assert "error" in reply, f"{method} ({ex.get('title', 'main')}): answered a result, an error was recorded"
            got = (reply["error"]["code"], reply["error"].get("data", {}).get("code"))
            assert got == (ex["error"]["code"], ex["error"]["data"]["code"]), method
