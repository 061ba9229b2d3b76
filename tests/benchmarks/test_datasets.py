"""Dataset format, validation (BENCHMARK_DATASET_INVALID names file, line, case and field), content_hash, registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sidecar.benchmarks.datasets import DatasetRegistry, load_dataset
from sidecar.core.errors import SidecarError
from tests.benchmarks.conftest import SHIPPED, write_dataset

NOTE = {"note_id": "n1", "title": "T", "blocks": [{"block_id": "b1", "text": "hello world"}]}
CASE = {"case_id": "c1", "query": "hello", "expected_note_ids": ["n1"], "expected_block_ids": ["b1"]}


def _error(folder: Path) -> SidecarError:
    with pytest.raises(SidecarError) as info:
        load_dataset(folder, "imported")
    assert info.value.code == "BENCHMARK_DATASET_INVALID"
    return info.value


def test_shipped_rag_dataset_meets_the_issue() -> None:
    d = load_dataset(SHIPPED / "rag-core-v1", "builtin")
    assert d.kind == "rag" and d.manifest.version and d.content_hash.startswith("sha256:")
    assert len(d.cases) >= 60 and len(d.corpus) >= 40
    tags = [set(c.tags) for c in d.cases]
    assert sum("zh" in t for t in tags) >= 15 and sum("en" in t for t in tags) >= 15
    assert sum("cross-lingual" in t for t in tags) >= 10
    assert all(c.expected_note_ids for c in d.cases)
    assert sum(c.citation_required for c in d.cases) >= 60
    # close distractors: notes come in pairs within a folder (e.g. deadlock vs livelock)
    folders = [n.folder for n in d.corpus]
    assert sum(folders.count(f) >= 2 for f in set(folders)) >= 10


def test_shipped_agent_dataset_meets_the_issue() -> None:
    d = load_dataset(SHIPPED / "agent-core-v1", "builtin", tool_names=None)
    assert d.kind == "agent" and len(d.cases) >= 24
    write = [c for c in d.cases if "write" in c.tags]
    irrelevance = [c for c in d.cases if "irrelevance" in c.tags]
    assert len(write) >= 4 and all("write_file" in c.expected_tools for c in write)
    assert len(irrelevance) >= 4 and all(c.expected_tools == [] and c.allowed_tools for c in irrelevance)
    assert all(c.allowed_tools is not None for c in d.cases)
    assert any(c.mock_script is None for c in d.cases), "one case runs on the mock's plain answer"
    zh, en = (sum(lang in c.tags for c in d.cases) for lang in ("zh", "en"))
    assert zh == en >= 15, "issue 24: as many Chinese as English cases"


def test_content_hash_is_canonical(tmp_path: Path) -> None:
    a = write_dataset(tmp_path / "a", "ds", "rag", [CASE], [NOTE])
    b = tmp_path / "b" / "ds"
    b.mkdir(parents=True)
    (b / "dataset.json").write_text(json.dumps(json.loads((a / "dataset.json").read_text()), indent=4))
    reordered = dict(reversed(list(CASE.items())))
    (b / "cases.jsonl").write_text("\n" + json.dumps(reordered) + "\n\n")
    (b / "corpus.jsonl").write_text(json.dumps(NOTE, indent=None, separators=(", ", ": ")) + "\n")
    assert load_dataset(a, "imported").content_hash == load_dataset(b, "imported").content_hash
    (b / "cases.jsonl").write_text(json.dumps({**CASE, "query": "hello!"}) + "\n")
    assert load_dataset(a, "imported").content_hash != load_dataset(b, "imported").content_hash


@pytest.mark.parametrize(
    ("cases", "corpus", "where"),
    [
        ([{**CASE, "query": ""}], [NOTE], {"file": "cases.jsonl", "line": 1, "case_id": "c1", "field": "query"}),
        (
            [CASE, {**CASE, "case_id": "c2", "expected_note_ids": ["nope"]}],
            [NOTE],
            {"case_id": "c2", "field": "expected_note_ids"},
        ),
        ([{**CASE, "expected_block_ids": ["b9"]}], [NOTE], {"case_id": "c1", "field": "expected_block_ids"}),
        ([{**CASE, "typo_field": 1}], [NOTE], {"line": 1, "field": "typo_field"}),
        ([CASE, CASE], [NOTE], {"case_id": "c1", "field": "case_id"}),
        ([CASE], [], {"file": "corpus.jsonl"}),
        ([CASE], [{**NOTE, "blocks": []}], {"file": "corpus.jsonl", "line": 1, "field": "blocks"}),
    ],
)
def test_invalid_rag_datasets_name_case_and_field(tmp_path: Path, cases, corpus, where) -> None:  # type: ignore[no-untyped-def]
    err = _error(write_dataset(tmp_path, "bad", "rag", cases, corpus))
    assert err.details["dataset_id"] == "bad"
    for key, value in where.items():
        assert err.details[key] == value, (key, err.details)


def test_invalid_files(tmp_path: Path) -> None:
    folder = write_dataset(tmp_path, "bad", "rag", [CASE], [NOTE])
    (folder / "cases.jsonl").write_text('{"case_id": "c1", \n')
    assert _error(folder).details["line"] == 1
    (folder / "cases.jsonl").write_bytes(b"\xff\xfe")
    assert _error(folder).details["file"] == "cases.jsonl"
    (folder / "dataset.json").write_text(json.dumps({"dataset_id": "other", "kind": "rag", "version": "1"}))
    assert _error(folder).details["field"] == "dataset_id"
    (folder / "dataset.json").write_text(json.dumps({"dataset_id": "bad", "kind": "video", "version": "1"}))
    assert _error(folder).details["field"] == "kind"


def test_invalid_agent_cases(tmp_path: Path) -> None:
    case = {"case_id": "a1", "prompt": "hi", "allowed_tools": ["calculator"], "expected_tools": []}
    folder = write_dataset(tmp_path, "ag", "agent", [{**case, "expected_conditions": {"tasks_created": 3}}])
    assert _error(folder).details["field"] == "expected_conditions"
    write_dataset(tmp_path, "ag", "agent", [{**case, "allowed_tools": ["teleport"]}])
    with pytest.raises(SidecarError) as info:
        load_dataset(folder, "imported", tool_names={"calculator"})
    assert info.value.code == "BENCHMARK_DATASET_INVALID" and info.value.details["field"] == "allowed_tools"
    write_dataset(tmp_path, "ag", "agent", [{**case, "mock_script": {"turns": [{"bogus": 1}]}}])
    with pytest.raises(SidecarError) as info:
        load_dataset(folder, "imported", tool_names={"calculator"})
    assert info.value.code == "BENCHMARK_DATASET_INVALID" and info.value.details["case_id"] == "a1"
    assert info.value.details["field"] == "mock_script.turns.0.bogus"


def test_registry_lists_valid_and_reports_invalid(tmp_path: Path) -> None:
    imported = tmp_path / "imported"
    write_dataset(imported, "mine", "rag", [CASE], [NOTE])
    write_dataset(imported, "broken", "rag", [{**CASE, "expected_note_ids": []}], [NOTE])
    write_dataset(imported, "rag-core-v1", "rag", [CASE], [NOTE])  # shadowed by the shipped one
    reg = DatasetRegistry([(SHIPPED, "builtin"), (imported, "imported")])
    good, bad = reg.scan()
    ids = {d.dataset_id: d.source for d in good}
    assert ids == {
        "rag-core-v1": "builtin",
        "agent-core-v1": "builtin",
        "agent-bilingual-v1": "builtin",
        "agent-bilingual-v2": "builtin",
        "mine": "imported",
    }
    assert [(p.dataset_id, p.error.code) for p in bad] == [("broken", "BENCHMARK_DATASET_INVALID")]
    assert len(reg.get("rag-core-v1").cases) >= 60
    with pytest.raises(SidecarError) as info:
        reg.get("nope")
    assert info.value.code == "BENCHMARK_DATASET_NOT_FOUND" and info.value.status == 404
