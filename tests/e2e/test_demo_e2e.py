"""The README's run command: ``python -m sidecar demo -o DIR`` walks the whole acceptance chain over stdio.

One demo run serves the module (it takes about a minute and a half warm). Structure only, never the model's wording:
every step ok in order, the ids a person looks up next, the PDF's text layer holds transcript words and the
diagram's title, the DOCX opens, the trace shows the MCP tool call and cites the transcript note (a Citation event of
the agent's own knowledge search), index.html links every output. Against the binary: test_demo_binary_e2e.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import speech
from tests.support.sidecar_proc import ROOT

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not speech.have_espeak(), reason="espeak-ng is not installed"),
    pytest.mark.skipif(bool(os.environ.get("SIDECAR_CMD")), reason="against the binary: test_demo_binary_e2e.py"),
]

STEPS = ["transcribe", "note", "search", "plugin", "agent", "render", "export", "theme", "benchmark", "document"]
MODEL_DIR = ROOT / ".cache" / "local-model"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("demo") / "out"
    env = {k: v for k, v in os.environ.items() if k != "METONA_LOCAL_MODEL_DIR"}  # the demo finds it itself
    done = subprocess.run(
        [sys.executable, "-m", "sidecar", "demo", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=ROOT,
        check=False,
    )
    print(done.stdout)
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else None
    return {"done": done, "out": out, "summary": summary}


def _step(demo: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in demo["summary"]["steps"] if s["name"] == name)


def test_every_step_is_ok_in_order_and_the_command_exits_0(demo: dict[str, Any]) -> None:
    done, summary = demo["done"], demo["summary"]
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert summary["ok"] is True
    assert [s["name"] for s in summary["steps"]] == STEPS
    for step in summary["steps"]:
        assert step["status"] == "ok", step
        assert isinstance(step["seconds"], float | int) and step["seconds"] >= 0
        for rel in step["outputs"]:
            assert not Path(rel).is_absolute() and (demo["out"] / rel).is_file(), (step["name"], rel)
    # a progress line per step on stderr, the human summary on stdout
    for i, name in enumerate(STEPS, start=1):
        assert re.search(rf"^demo \[{i}/10\] {name} ok \(\d+\.\d s\)$", done.stderr, re.M), done.stderr
    assert "every step ok" in done.stdout
    for name in STEPS:
        assert re.search(rf"^  {name} +ok +\d+\.\d s", done.stdout, re.M), done.stdout
    # the data dir was temporary (no --keep)
    assert not Path(summary["data_dir"]).exists()


def test_summary_carries_the_ids_to_look_up_next(demo: dict[str, Any]) -> None:
    summary = demo["summary"]
    provider = summary["provider"]
    assert set(provider) == {"id", "model", "kind"}
    assert provider["kind"] in ("local", "mock"), provider  # no --provider given
    if MODEL_DIR.is_dir():  # scripts/setup prepared the embedded model: the demo finds it and runs on it
        assert provider == {"id": "local", "model": "qwen2.5-coder-0.5b-instruct", "kind": "local"}
    assert _step(demo, "transcribe")["details"]["job_id"].startswith("transcription_")
    assert len(_step(demo, "transcribe")["details"]["speakers"]) == 2
    note = _step(demo, "note")["details"]
    assert note["note_id"] and note["cited_blocks"] == note["blocks"] >= 2
    cite = _step(demo, "search")["details"]["citation"]
    assert cite["source_audio"] == _step(demo, "transcribe")["details"]["attachment_id"]
    assert cite["speaker"].startswith("SPEAKER_") and cite["end_time"] > cite["start_time"] >= 0
    assert _step(demo, "plugin")["details"]["plugin_id"] == "time"
    agent = _step(demo, "agent")["details"]
    assert agent["run_id"].startswith("run_") and isinstance(agent["answer"], str) and agent["answer"].strip()
    assert "time.get_current_time" in agent["tools_called"] and agent["plugin_tool_succeeded"] is True
    # the answer cites the transcript note: the trace's Citation event from the agent's own knowledge search
    assert "knowledge_search" in agent["tools_called"] and agent["search_tool_succeeded"] is True
    assert agent["citation_found"] is True and note["note_id"] in agent["cited_note_ids"]
    cited = agent["citation"]
    assert cited["note_id"] == note["note_id"] and cited["block_id"] and cited["text"]
    assert cited["source_audio"] == _step(demo, "transcribe")["details"]["attachment_id"]
    assert cited["speaker"].startswith("SPEAKER_") and cited["end_time"] > cited["start_time"] >= 0
    assert len(_step(demo, "export")["details"]["job_ids"]) == 3
    assert len(_step(demo, "theme")["details"]["job_ids"]) == 1
    assert _step(demo, "benchmark")["details"]["status"] == "completed"
    # issue 31: the PDF it built is imported, found with its page, and the agent's answer cites that page
    doc = _step(demo, "document")["details"]
    assert doc["status"] == "completed" and doc["pages"] >= 2 and doc["ocr_pages"] == []
    assert 2 <= doc["search_page"] <= doc["pages"]
    assert any(c["page"] == doc["search_page"] and c["note_id"] == doc["note_id"] for c in doc["citations"])


def test_the_trace_shows_the_mcp_tool_call(demo: dict[str, Any]) -> None:
    trace = json.loads((demo["out"] / "agent-trace.json").read_text())
    assert trace["run"]["run_id"] == _step(demo, "agent")["details"]["run_id"]
    events = trace["events"]
    calls = [e["data"] for e in events if e["event"] == "ToolCall"]
    assert {c["tool_name"] for c in calls} == {"knowledge_search", "time.get_current_time"}
    call = next(c for c in calls if c["tool_name"] == "time.get_current_time")
    result = next(
        e["data"] for e in events if e["event"] == "ToolResult" and e["data"]["tool_call_id"] == call["tool_call_id"]
    )
    assert result["success"] is True
    assert events[-1]["event"] == "RunCompleted"
    page = (demo["out"] / "agent-trace.html").read_text()
    assert "ToolCall" in page and "time.get_current_time" in page


def test_the_trace_cites_the_transcript_note_from_the_agents_search(demo: dict[str, Any]) -> None:
    events = json.loads((demo["out"] / "agent-trace.json").read_text())["events"]
    note_id = _step(demo, "note")["details"]["note_id"]
    attachment = _step(demo, "transcribe")["details"]["attachment_id"]
    searches = {e["data"]["tool_call_id"] for e in events if e["event"] == "ToolCall"
                and e["data"]["tool_name"] == "knowledge_search"}  # fmt: skip
    cited = [e["data"] for e in events if e["event"] == "Citation" and e["data"]["note_id"] == note_id]
    assert cited and all(c["tool_call_id"] in searches for c in cited)
    sources = cited[0]["citations"]
    assert sources and sources[0]["source_audio"] == attachment
    # the timeline and the index show the cited passage with its attachment, seconds and speaker
    agent = _step(demo, "agent")["details"]["citation"]
    span = f"attachment {attachment} {agent['start_time']:.1f}–{agent['end_time']:.1f} s {agent['speaker']}"
    assert span in (demo["out"] / "agent-trace.html").read_text()
    index = (demo["out"] / "index.html").read_text()
    assert span in index and "The agent's answer" in index


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils is not installed")
def test_the_pdf_text_layer_holds_transcript_words_and_the_diagram_title(demo: dict[str, Any]) -> None:
    text = subprocess.run(
        ["pdftotext", str(demo["out"] / "summary.pdf"), "-"], capture_output=True, text=True, check=True
    ).stdout
    spoken = set(re.findall(r"[a-z]{5,}", (demo["out"] / "transcript.txt").read_text().lower()))
    assert spoken
    found = {w for w in spoken if w in text.lower()}
    assert len(found) >= len(spoken) // 2, (sorted(spoken - found), text[:2000])
    assert "Meeting flow" in text  # a label inside the Mermaid diagram (drawn as vector text)


def test_the_docx_opens_and_the_exports_are_what_they_say(demo: dict[str, Any]) -> None:
    import docx

    out = demo["out"]
    document = docx.Document(str(out / "summary.docx"))
    assert any(p.text.startswith("Summary:") for p in document.paragraphs)
    assert (out / "summary.pdf").read_bytes().startswith(b"%PDF-")
    assert "<html" in (out / "summary.html").read_text().lower()
    themed = (out / "summary-themed.html").read_text()
    assert "#7b2cbf" in themed and "#7b2cbf" not in (out / "summary.html").read_text()
    assert (out / "theme-preview.png").read_bytes().startswith(b"\x89PNG")
    assert "-->" in (out / "transcript.srt").read_text()
    assert "rag-core-v1" in (out / "benchmark.html").read_text()


def test_index_links_every_output(demo: dict[str, Any]) -> None:
    page = (demo["out"] / "index.html").read_text()
    links = set(re.findall(r'href="([^"]+)"', page))
    outputs = {rel for step in demo["summary"]["steps"] for rel in step["outputs"]}
    wanted = {"transcript.srt", "transcript.txt", "summary.html", "summary.pdf", "summary.docx"}
    wanted |= {"summary-themed.html", "benchmark.html", "agent-trace.html"}
    assert wanted <= outputs
    assert outputs | {"summary.json", "sidecar-stderr.log"} == links
    assert all((demo["out"] / link).is_file() for link in links)
