"""Issue 21: one not-found rule. The rule and its table are ipc_schema/README.md's "Not-found rule" section; this test
reads that table and walks the generated catalog: every method with a required ``*_id`` param, given unknown ids,
answers 404 with the code of its first id's row and the id in ``details`` under the param's name. A new method
that answers another code, or that has no row, fails here."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.sidecar_proc import Sidecar

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "ipc_schema" / "metona-sidecar.schema.json"
README = ROOT / "ipc_schema" / "README.md"
SEED = Path("/work/shared/seeds/phase2-interface-contracts.md")
# the phase-2 seed's not-found codes (§5.5, §7, §8, §10, §11, §12): kept exactly as spelled there
SEED_CODES = {
    "ATTACHMENT_NOT_FOUND",
    "TRANSCRIPTION_PROFILE_NOT_FOUND",
    "AGENT_RUN_NOT_FOUND",
    "PLUGIN_COMMAND_NOT_FOUND",
    "PLUGIN_SECRET_FIELD_NOT_FOUND",
    "MODEL_NOT_FOUND",
    "BENCHMARK_DATASET_NOT_FOUND",
    "BENCHMARK_RUN_NOT_FOUND",
    "EXPORT_SOURCE_NOT_FOUND",
    "EXPORT_JOB_NOT_FOUND",
    "THEME_PACKAGE_NOT_FOUND",
    "THEME_NOT_FOUND",
    "RESOURCE_NOT_FOUND",
}
# well-formed ids that exist nowhere; the first one that fits the param's schema pattern is sent
UNKNOWN_IDS = ("x_unknown_1", "x-unknown-1", "xunknown1")
# values for the non-id required params of the walked methods (any valid value: the id is looked up first)
FILLERS: dict[str, Any] = {"decision": "deny", "schema_version": 1, "values": {}, "key": "api_key", "secret": "s"}
ROW = re.compile(r"^\| `([^`]+)` \| `([^`]+)` \| `([A-Z_]+)` \|")


def rule_table() -> dict[tuple[str, str], str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Not-found rule", 1)[1].split("\n## ", 1)[0]
    rows = {(m[1], m[2]): m[3] for line in section.splitlines() if (m := ROW.match(line))}
    assert len(rows) >= 30, "the not-found table of ipc_schema/README.md was not found"
    return rows


def expected(rows: dict[tuple[str, str], str], method: str, param: str) -> str:
    matches = [(prefix, code) for (prefix, p), code in rows.items() if p == param and method.startswith(prefix)]
    assert matches, f"{method} addresses {param!r} but the not-found table in ipc_schema/README.md has no row for it"
    return max(matches, key=lambda m: len(m[0]))[1]


def walked_methods() -> list[tuple[str, dict[str, Any], str]]:
    """(method, params, first id param) for every catalog method with a required ``*_id`` param."""
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    defs = schema["$defs"]
    out = []
    for method, entry in schema["properties"]["methods"]["properties"].items():
        model = defs[entry["properties"]["params"]["$ref"].rsplit("/", 1)[-1]]
        required = model.get("required", [])
        ids = [f for f in required if f.endswith("_id")]
        if not ids:
            continue
        params = {}
        for field in required:
            if field.endswith("_id"):
                pattern = model["properties"][field].get("pattern")
                params[field] = next(v for v in UNKNOWN_IDS if pattern is None or re.search(pattern, v))
            else:
                assert field in FILLERS, f"{method}: give the required param {field!r} a filler value"
                params[field] = FILLERS[field]
        out.append((method, params, ids[0]))
    return out


@pytest.fixture(scope="module")
def sc(tmp_path_factory: pytest.TempPathFactory) -> Any:
    data = tmp_path_factory.mktemp("notfound") / "data"
    data.mkdir()
    proc = Sidecar(data, env={"METONA_DEVELOPMENT": "1"})  # plugins/install takes a package_path
    proc.initialize()
    yield proc
    proc.close()


def assert_rule(reply: dict[str, Any], code: str, where: str) -> dict[str, Any]:
    error = reply.get("error")
    assert error is not None, (where, reply)
    assert (error["code"], error["data"]["code"]) == (404, code), (where, error)
    return error["data"]["details"]


def test_the_rule_table_keeps_the_seed_codes() -> None:
    rows = rule_table()
    for code in rows.values():
        assert code.endswith("_NOT_FOUND"), code
    if SEED.is_file():  # the seeds live beside the checkout; the constant above is their list
        seed = set(re.findall(r"\b[A-Z][A-Z_]*_NOT_FOUND\b", SEED.read_text(encoding="utf-8")))
        assert seed == SEED_CODES
    named_in_seed = {code for code in rows.values() if code in SEED_CODES}
    assert named_in_seed == SEED_CODES


def test_every_method_by_id_answers_the_rule_for_an_unknown_id(sc: Sidecar) -> None:
    rows = rule_table()
    walked = walked_methods()
    assert len(walked) >= 50
    for method, params, first in walked:
        details = assert_rule(sc.call(method, params), expected(rows, method, first), method)
        assert details.get(first) == params[first], (method, details)
    sc.assert_alive()


def test_references_by_optional_nested_or_path_params_answer_the_rule(sc: Sidecar, tmp_path: Path) -> None:
    rows = rule_table()
    nowhere = str(tmp_path / "does-not-exist")
    request = {
        "meta": {"sessionId": "nf", "iteration": 1, "requestId": "h-1", "timestamp": 1, "agentVersion": "nf"},
        "systemPrompt": {"roleDefinition": "", "outputConstraints": "", "safetyGuidelines": ""},
        "messages": [{"role": "user", "content": "hi", "timestamp": 1}],
        "params": {"stream": False},
    }
    mock = sc.result("providers/create", {"provider_id": "nf-mock", "preset": "mock"})["provider_id"]
    # ollama has no default model (nothing is sent to it: the run is refused before any call)
    no_model = sc.result("providers/create", {"provider_id": "nf-ollama", "preset": "ollama"})["provider_id"]
    cases: list[tuple[str, str, dict[str, Any]]] = [
        ("search/query", "profile_id", {"query": "x", "profile_id": "x-unknown-1"}),
        ("plugins/install", "package_id", {"package_id": "pkg-unknown-1"}),
        ("plugins/install", "package_path", {"package_path": nowhere}),
        ("themes/inspect", "path", {"path": nowhere}),
        ("attachments/import", "path", {"path": nowhere}),
        ("exports/create", "source.note_id", {"source": {"type": "note", "note_id": "x_unknown_1"}, "format": "html"}),
        ("memory/add", "supersedes", {"content": "c", "type": "semantic", "supersedes": ["x_unknown_1"]}),
        ("agent/runs/create", "provider_id", {"provider_id": "x-unknown-1", "request": request}),
        ("agent/runs/create", "allowed_tools", {"provider_id": mock, "request": request, "allowed_tools": ["nope"]}),
        ("agent/runs/create", "model", {"provider_id": no_model, "request": request}),
        ("dev/jobs/get", "job_id", {"job_id": "x_unknown_1"}),
    ]
    for method, param, params in cases:
        assert_rule(sc.call(method, params), expected(rows, method, param), f"{method} {param}")
    sc.assert_alive()
