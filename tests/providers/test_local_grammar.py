"""The compact grammar the local-model worker writes for a JSON schema (:mod:`sidecar.localmodel.jsongrammar`): which
schemas it writes and which it leaves to the runtime's own JSON-schema constraint, and — on the real runtime with
the packaged 0.5B model, loaded once for the module (f32, greedy) — what it guarantees whatever the model writes:
no whitespace but ``": "`` and ``", "``, keys in their declared order, numbers of bounded length, so that a number
the model cannot stop writing ends with the object instead of at the token limit."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jsonschema
import pytest

from sidecar.localmodel import assets
from sidecar.localmodel.jsongrammar import (
    FRACTION_DIGITS,
    INTEGER_DIGITS,
    MAX_ITEMS_WRITTEN,
    compact_grammar,
    runaway,
)
from sidecar.providers import localtools as lt

ROOT = Path(__file__).resolve().parents[2]
MODEL_DIR = ROOT / ".cache" / "local-model"
"""Where scripts/setup prepared the model (as the e2e tests use it)."""


INTEGER = {"type": "integer"}


def closed(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        **({"required": required} if required else {}),
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    "schema",
    [
        closed({"q": {"type": "string", "pattern": "^a"}}),
        closed({"q": {"anyOf": [{"type": "string"}, {"type": "number"}], "minimum": 1}}),  # beside another key
        closed({"q": {"anyOf": []}}),
        closed({"n": {"type": "integer", "minimum": 1}}),
        {"type": "object", "properties": {"q": {"type": "string"}}},  # declares keys and is open to others
        closed({"q": {"type": "string", "enum": []}}),
        closed({"q": {"type": "date"}}),
    ],
)
def test_what_the_grammar_does_not_write_is_left_to_the_runtimes_json_schema(schema: dict[str, Any]) -> None:
    assert compact_grammar(schema) is None


def test_one_of_several_forms_is_written_as_their_alternatives() -> None:
    """``anyOf`` alone: a number, or a named value (Docker's ``tail: int | Literal["all"]``)."""
    grammar = compact_grammar(closed({"tail": {"anyOf": [{"type": "number", "enum": [50]}, {"enum": ["all"]}]}}))
    assert grammar is not None and '"\\"tail\\": " (("50") | ("\\"all\\""))' in grammar


def test_the_arguments_schemas_of_built_in_and_plugin_tools_are_written_as_the_grammar() -> None:
    nested = {
        "type": "object",
        "required": ["customer", "items"],
        "properties": {
            "customer": {"type": "object", "properties": {"name": {"type": "string"}, "vip": {"type": "boolean"}}},
            "items": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}}}},
            "note": {"type": ["string", "null"]},
            "extra": {"type": "object"},
            "any": {"description": "anything"},
        },
    }
    path = lt.arguments_schema({"type": "object", "properties": {"path": {"type": "string"}}})
    paths = lt.ground_arguments(path, ["会议纪要.md", 'My "Notes".md'])
    for schema in (lt.arguments_schema(nested), paths):
        grammar = compact_grammar(schema)
        assert grammar is not None and grammar.startswith("root ::= ")
    assert '"\\"My \\\\\\"Notes\\\\\\".md\\""' in (compact_grammar(paths) or "")  # a quote in a name, escaped twice


def test_an_arrays_most_items_bound_its_items() -> None:
    """``maxItems`` is written as that many items at most (each further one optional after the one before); none
    for ``maxItems: 0``; more than :data:`MAX_ITEMS_WRITTEN` written unbounded; not a count: not written here."""
    item = {"type": "string", "enum": ["x", "y", "z"]}
    grammar = compact_grammar({"type": "array", "items": item, "maxItems": 3})
    assert grammar is not None
    assert 'r1 ::= "[" (r0 (", " r0 (", " r0)?)?)? "]"' in grammar and 'r0 ::= ("\\"x\\"" |' in grammar
    assert 'root ::= r0\nr0 ::= "[]"' in (compact_grammar({"type": "array", "items": item, "maxItems": 0}) or "")
    unbounded = compact_grammar({"type": "array", "items": INTEGER, "maxItems": MAX_ITEMS_WRITTEN + 1}) or ""
    assert 'r0 ::= "[" (integer (", " integer)*)? "]"' in unbounded
    assert compact_grammar({"type": "array", "items": INTEGER, "maxItems": "2"}) is None


def test_a_number_of_more_digits_than_the_grammar_allows_is_a_runaway() -> None:
    assert runaway({"a": [1, {"b": 10 ** (INTEGER_DIGITS - 1)}]}) and runaway(-1.5e20)
    assert not runaway({"a": 10 ** (INTEGER_DIGITS - 1) - 1, "b": True, "c": "1" * 40})
    assert lt.read_arguments('{"n": 1' + "0" * 30, "length") == (None, "runaway")  # cut short in it
    assert lt.read_arguments('{"n": 1' + "0" * (INTEGER_DIGITS - 1) + "}", "stop") == (None, "runaway")  # ended there
    assert lt.read_arguments('{"n": 12', "loop") == (None, "loop")
    assert lt.read_arguments('{"n": 12}', "stop") == ({"n": 12}, "stop")


# ---- on the real runtime ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def worker() -> Iterator[Any]:
    if not assets.runtime_available():
        pytest.skip("the local-model extra is not installed")
    from sidecar.localmodel.worker import Worker

    deltas: list[str] = []
    out = SimpleNamespace(deltas=deltas, delta=lambda _job, text: deltas.append(text), progress=lambda *_a: None)
    running = Worker(out)  # type: ignore[arg-type]
    running.load({"root": str(MODEL_DIR), "precision": "f32"}, "load")
    yield running


def write(worker: Any, said: str, schema: dict[str, Any], max_tokens: int = 60) -> tuple[str, str]:
    worker.out.deltas.clear()
    job = {
        "messages": [
            {"role": "system", "content": "Repeat the user's text exactly."},
            {"role": "user", "content": said},
        ],
        "max_tokens": max_tokens,
        "json_schema": schema,
    }
    result = worker.generate(job, "job")
    return "".join(worker.out.deltas), result["finish"]


_OUTSIDE_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')


def compact(text: str) -> bool:
    """No whitespace outside strings but one space after ``:`` and after ``,``."""
    bare = _OUTSIDE_STRINGS.sub('""', text)
    return not re.search(r"\s", bare.replace(": ", ":").replace(", ", ","))


def test_a_number_the_model_cannot_stop_ends_with_the_object(worker: Any) -> None:
    schema = closed({"n": {"type": "integer"}}, ["n"])
    text, finish = write(worker, '{"n": 1' + "0" * 60 + "}", schema, max_tokens=30)
    assert finish == "stop", text  # the grammar ended the number: the object closed within the budget
    value = json.loads(text)["n"]
    assert len(str(value)) <= INTEGER_DIGITS and compact(text)
    schema = closed({"x": {"type": "number"}}, ["x"])
    text, finish = write(worker, '{"x": 200.' + "0" * 50 + "1}", schema, max_tokens=30)
    assert finish == "stop", text
    assert len(text.split(".", 1)[-1].rstrip("}")) <= FRACTION_DIGITS and json.loads(text)["x"] == pytest.approx(200)


@pytest.mark.parametrize(
    ("said", "schema", "bounded"),
    [
        ('{"zeta": 1, "alpha": 2}', closed({"alpha": INTEGER, "zeta": INTEGER}, ["alpha", "zeta"]), True),
        ('{"alpha": 2}', closed({"alpha": {"type": "object"}}), False),  # once spaces to the loop guard
        ('{\n  "alpha":\n    1\n}', closed({"alpha": INTEGER}), True),
        (
            '{"path": "会议纪要.md", "tags": ["a", "b"], "opts": {"x": true, "y": null}}',
            closed(
                {
                    "path": {"type": "string", "enum": ["会议纪要.md", 'My "Notes".md']},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "opts": closed({"x": {"type": "boolean"}, "y": {"type": ["string", "null"]}}),
                },
                ["path"],
            ),
            False,
        ),
        ('{"path": "My \\"Notes\\".md"}', closed({"path": {"type": "string", "enum": ['My "Notes".md', "b"]}}), True),
        (  # a choice of options names each once: no more items than the enum has values, not a loop
            '{"d": ["x", "y", "x", "y", "x", "y", "x", "y", "x", "y"]}',
            closed({"d": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}, "maxItems": 2}}, ["d"]),
            True,
        ),
    ],
)
def test_what_the_model_writes_is_compact_and_valid(
    worker: Any, said: str, schema: dict[str, Any], bounded: bool
) -> None:
    text, finish = write(worker, said, schema)
    assert compact(text), text
    assert finish == "stop" or not bounded, text  # no free string, no open object: the grammar ends the text
    if finish == "stop":  # whatever the model chose to write, the grammar allowed only what the schema allows
        value = json.loads(text)
        jsonschema.validate(value, schema)
        declared = list(schema["properties"])
        assert list(value) == sorted(value, key=declared.index)  # in the declared order
