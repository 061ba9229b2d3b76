"""Benchmarks over real stdio and from the ``bench`` CLI: datasets, RAG and agent runs as jobs with per-case events,
reports, cancel keeping finished cases, isolation of the user's notes, and the §9.8 error codes."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.sidecar_proc import ROOT, Sidecar, sidecar_cmd

pytestmark = pytest.mark.e2e

SLOW = 120.0
SUBSET = ["rag-zh-001", "rag-zh-005", "rag-en-001", "rag-en-004", "rag-x-001", "rag-x-007", "rag-x-010"]
TERMINAL = {"completed", "failed", "cancelled"}


def _wait(sc: Sidecar, run_id: str, limit_s: float = SLOW) -> dict[str, Any]:
    deadline = time.monotonic() + limit_s
    while True:
        run = sc.result("benchmarks/runs/get", {"run_id": run_id})
        if run["status"] in TERMINAL:
            return run
        assert time.monotonic() < deadline, run
        time.sleep(0.05)


def _code(resp: dict[str, Any]) -> tuple[int, str]:
    return resp["error"]["code"], resp["error"]["data"]["code"]


def test_rag_and_agent_benchmarks_over_stdio(sidecar: Sidecar, data_dir: Path) -> None:
    sc = sidecar
    plots = sc.initialize()["capabilities"]["components"]["matplotlib"]
    assert plots["available"] is True, plots  # the report's plots: the binary carries matplotlib too
    listed = sc.result("benchmarks/datasets/list", {"kind": "rag"})
    rag = {d["dataset_id"]: d for d in listed["items"]}["rag-core-v1"]
    assert rag["case_count"] >= 60 and rag["content_hash"].startswith("sha256:") and rag["version"]
    note = sc.result("notes/create", {"title": "mine", "content": "死锁 my own note"}, timeout=SLOW)

    run = sc.result("benchmarks/rag/runs/create", {"dataset_id": "rag-core-v1", "case_ids": SUBSET}, timeout=SLOW)
    assert run["status"] == "queued" and run["dataset_hash"] == rag["content_hash"]
    sub = sc.result("events/subscribe", {"resource_id": run["run_id"]})["subscription_id"]
    pushed: list[str] = []
    while not pushed or pushed[-1] not in ("Completed", "Failed", "Cancelled"):
        msg = sc.next(SLOW)
        if isinstance(msg, dict) and msg.get("method") == "event" and msg["params"]["subscription_id"] == sub:
            pushed.append(msg["params"]["event"])
    assert pushed.count("CaseCompleted") == 3 * len(SUBSET) and "Progress" in pushed
    done = sc.result("benchmarks/runs/get", {"run_id": run["run_id"]})
    assert done["status"] == "completed", done["error"]
    assert set(done["metrics"]) == {"fts", "vector", "hybrid"} and done["metrics"]["hybrid"]["hit_at_5"] >= 0.85
    assert done["config_snapshot"]["index"]["embedding"]["dimension"] == 512
    report = sc.result("benchmarks/runs/report", {"run_id": run["run_id"]})
    assert len(report["cases"]) == 3 * len(SUBSET) and report["run"]["run_id"] == run["run_id"]
    events = sc.result("benchmarks/runs/events", {"run_id": run["run_id"], "limit": 1000})
    assert [e["event"] for e in events["items"]].count("CaseCompleted") == 3 * len(SUBSET)

    agent = sc.result("benchmarks/agent/runs/create", {"dataset_id": "agent-core-v1"}, timeout=SLOW)
    finished = _wait(sc, agent["run_id"])
    assert finished["status"] == "completed", finished["error"]
    m = finished["metrics"]
    assert m["case_count"] >= 24 and m["task_success_rate"] > 0.9 and m["failed_count"] == 1
    areport = sc.result("benchmarks/runs/report", {"run_id": agent["run_id"]})
    trace_id = areport["failures"][0]["trace_run_id"]
    assert sc.result("agent/runs/get", {"run_id": trace_id})["session_id"] == agent["run_id"]
    page = sc.result("benchmarks/runs/list", {"kind": "agent"})
    assert [r["run_id"] for r in page["items"]] == [agent["run_id"]] and page["page"]["total"] == 1
    assert sc.result("benchmarks/runs/list", {"status": "completed"})["page"]["total"] == 2

    # the user's note is untouched and still the only one
    notes = sc.result("notes/list", {})
    assert [n["note_id"] for n in notes["items"]] == [note["note_id"]]
    assert sc.result("index/status", {})["fts_index"]["block_count"] == len(note["blocks"])


def test_cancel_and_errors_over_stdio(ready: Sidecar, data_dir: Path) -> None:
    sc = ready
    run = sc.result("benchmarks/rag/runs/create", {"dataset_id": "rag-core-v1", "repeat": 20}, timeout=SLOW)
    deadline = time.monotonic() + SLOW
    while (sc.result("benchmarks/runs/get", {"run_id": run["run_id"]})["progress"] or {}).get("phase") != "searching":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.2)
    assert sc.result("benchmarks/runs/cancel", {"run_id": run["run_id"]})["accepted"] is True
    done = _wait(sc, run["run_id"])
    assert done["status"] == "cancelled"
    report = sc.result("benchmarks/runs/report", {"run_id": run["run_id"]})
    assert 0 < len(report["cases"]) < 20 * 3 * 65 and report["metrics"]["hybrid"]["case_count"] >= 1

    assert _code(sc.call("benchmarks/rag/runs/create", {"dataset_id": "nope"})) == (404, "BENCHMARK_DATASET_NOT_FOUND")
    bad = sc.call("benchmarks/rag/runs/create", {"dataset_id": "rag-core-v1", "modes": ["telepathy"], "repeat": 0})
    assert _code(bad) == (400, "BENCHMARK_CONFIG_INVALID")
    assert {e["field"] for e in bad["error"]["data"]["details"]["errors"]} == {"modes.0", "repeat"}
    wrong_kind = sc.call("benchmarks/agent/runs/create", {"dataset_id": "rag-core-v1"})
    assert _code(wrong_kind) == (400, "BENCHMARK_CONFIG_INVALID")
    assert _code(sc.call("benchmarks/runs/get", {"run_id": "benchmark_x"})) == (404, "BENCHMARK_RUN_NOT_FOUND")

    broken = data_dir / "datasets" / "my-set"  # a host import with a bad case
    broken.mkdir(parents=True)
    (broken / "dataset.json").write_text(json.dumps({"dataset_id": "my-set", "kind": "rag", "version": "1"}))
    (broken / "corpus.jsonl").write_text(
        json.dumps({"note_id": "n", "title": "t", "blocks": [{"block_id": "b", "text": "x"}]}) + "\n"
    )
    (broken / "cases.jsonl").write_text(
        json.dumps({"case_id": "c1", "query": "x", "expected_note_ids": ["n"], "citation_required": "maybe"}) + "\n"
    )
    invalid = sc.call("benchmarks/rag/runs/create", {"dataset_id": "my-set"})
    assert _code(invalid) == (400, "BENCHMARK_DATASET_INVALID")
    details = invalid["error"]["data"]["details"]
    assert (details["file"], details["line"], details["case_id"], details["field"]) == (
        "cases.jsonl",
        1,
        "c1",
        "citation_required",
    )
    assert [p["dataset_id"] for p in sc.result("benchmarks/datasets/list", {})["invalid"]] == ["my-set"]


def test_bench_cli(tmp_path: Path) -> None:
    out = tmp_path / "reports"
    env = dict(os.environ, METONA_SECRET_KEY_FILE=str(tmp_path / "key"))
    for args in (
        ["rag", "--dataset", "rag-core-v1", "--cases", ",".join(SUBSET)],
        ["agent", "--dataset", "agent-core-v1"],
    ):
        proc = subprocess.run(
            [*sidecar_cmd(), "bench", *args, "-o", str(out), "--data-dir", str(tmp_path / "data")],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            cwd=ROOT,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert ("hybrid" if args[0] == "rag" else "task_success_rate") in proc.stdout
        assert "status completed" in proc.stdout
    reports = sorted(out.glob("*.json"))
    assert len(reports) == 2 and len(list(out.glob("*.html"))) == 2
    for page in out.glob("*.html"):  # the plots are drawn (source install and binary alike)
        html = page.read_text("utf-8")
        assert '<figure class="plot" data-plot="metrics"><svg' in html and 'class="missing"' not in html, page.name
    kinds = {json.loads(p.read_text())["run"]["kind"] for p in reports}
    assert kinds == {"rag", "agent"}
    bad = subprocess.run(
        [*sidecar_cmd(), "bench", "rag", "--dataset", "nope", "--data-dir", str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    assert bad.returncode == 2 and "BENCHMARK_DATASET_NOT_FOUND" in bad.stderr
