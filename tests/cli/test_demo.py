"""The demo's own logic without a sidecar: which steps run after a failure, and the files it writes."""

from __future__ import annotations

import argparse
import io
import json
import re
import threading
import wave
import zipfile
from pathlib import Path
from typing import Any

import pytest

from sidecar.cli import demo_media as media
from sidecar.cli.demo import (
    AGENT_CALLS,
    STEPS,
    TIME_SERVER,
    Demo,
    Step,
    StepFailed,
    _env,
    agent_question,
    checkouts,
    key_variable,
    mock_provider,
    prepare_agent,
    render,
    run_steps,
    sidecar_command,
    time_server,
    transcript_citation,
)
from sidecar.cli.wire_client import WireError
from sidecar.workers import engines


def _demo(tmp_path: Path, quiet: bool = False) -> Demo:
    ns = argparse.Namespace(quiet=quiet, audio=None, provider=None)
    return Demo(ns, tmp_path, client=None, init={"data_dir": str(tmp_path / "data"), "capabilities": {}})  # type: ignore[arg-type]


def _steps(behaviour: dict[str, Exception | None]) -> tuple[list[Step], list[str]]:
    ran: list[str] = []

    def make(name: str) -> Any:
        def run(_: Demo) -> None:
            ran.append(name)
            if behaviour.get(name) is not None:
                raise behaviour[name]  # type: ignore[misc]

        return run

    return [Step(name, needs, make(name)) for name, needs, _ in STEPS], ran


def test_a_failed_step_skips_only_what_depends_on_it(tmp_path: Path) -> None:
    steps, ran = _steps({"transcribe": StepFailed("ESPEAK_UNAVAILABLE", "espeak-ng is not installed")})
    err = io.StringIO()
    run_steps(_demo(tmp_path), steps, err)
    assert sorted(ran) == ["benchmark", "plugin", "transcribe"]
    status = {s.name: s.status for s in steps}
    assert status == {
        "transcribe": "failed",
        "note": "skipped",
        "search": "skipped",
        "plugin": "ok",
        "agent": "skipped",
        "render": "skipped",
        "export": "skipped",
        "theme": "skipped",
        "benchmark": "ok",
        "document": "skipped",
    }
    transcribe = steps[0]
    assert transcribe.details["error"] == {
        "code": "ESPEAK_UNAVAILABLE",
        "message": "espeak-ng is not installed",
        "details": {},
    }
    assert steps[4].details["reason"] == "needs search"
    assert "demo [1/10] transcribe failed (" in err.getvalue()
    assert "ESPEAK_UNAVAILABLE: espeak-ng is not installed" in err.getvalue()


def test_a_wire_error_fails_its_step_with_the_sidecars_code(tmp_path: Path) -> None:
    failure = WireError("PLUGIN_INCOMPATIBLE", "the plugin needs a newer app", {"method": "plugins/install"})
    steps, ran = _steps({"plugin": failure})
    err = io.StringIO()
    run_steps(_demo(tmp_path, quiet=True), steps, err)
    assert [s.name for s in steps if s.status == "failed"] == ["plugin"]
    assert [s.name for s in steps if s.status == "skipped"] == ["agent", "document"]
    assert steps[3].details["error"]["code"] == "PLUGIN_INCOMPATIBLE"
    assert sorted(ran) == sorted(name for name, _, _ in STEPS if name not in ("agent", "document"))
    # quiet: only the failure is printed
    line = r"demo \[4/10\] plugin failed \(\d+\.\d s\): PLUGIN_INCOMPATIBLE: the plugin needs a newer app\n"
    assert re.fullmatch(line, err.getvalue()), err.getvalue()


def test_srt_and_text_transcripts() -> None:
    segments = [
        {"speaker": "SPEAKER_00", "start_time": 0.0, "end_time": 3.25, "text": " Hello there. "},
        {"speaker": None, "start_time": 3661.5, "end_time": 3662.0, "text": "Bye."},
    ]
    assert media.srt(segments) == (
        "1\n00:00:00,000 --> 00:00:03,250\n[SPEAKER_00] Hello there.\n\n2\n01:01:01,500 --> 01:01:02,000\nBye.\n"
    )
    assert media.plain_text(segments).splitlines() == [
        "[   0.0–   3.2 s] SPEAKER_00: Hello there.",
        "[3661.5–3662.0 s] Bye.",
    ]


def test_summary_markdown_has_the_diagram_plot_and_turns() -> None:
    blocks = [
        {"text": "[00:00–00:07] SPEAKER_00: The launch is on Friday (June).", "citations": [
            {"source_audio": "att_1", "start_time": 0.0, "end_time": 7.0, "speaker": "SPEAKER_00"}]},
        {"text": "a block without a time", "citations": []},
        {"text": "[00:08–00:10] SPEAKER_01: Budget \"forty\" thousand.", "citations": [
            {"source_audio": "att_1", "start_time": 8.0, "end_time": 10.0, "speaker": "SPEAKER_01"}]},
    ]  # fmt: skip
    turns = media.turns_of(blocks)
    assert [(t["speaker"], t["text"]) for t in turns] == [
        ("SPEAKER_00", "The launch is on Friday (June)."),
        ("SPEAKER_01", 'Budget "forty" thousand.'),
    ]
    markdown, mermaid, plot = media.summary_markdown("Launch", "note_1", turns)
    assert mermaid.splitlines()[:2] == ["flowchart TD", '  start(["Meeting flow"])']
    assert 'T1["SPEAKER_00 at 0 s: The launch is on Friday …"]' in mermaid
    assert 'T2["SPEAKER_01 at 8 s: Budget forty thousand."]' in mermaid  # no quotes or brackets inside a label
    assert "  - expression: 0.700*x" in plot and "  - expression: 0.200*x" in plot
    assert "domain: [0, 10.0]" in plot
    assert f"```mermaid\n{mermaid}\n```" in markdown and f"```function_plot\n{plot}\n```" in markdown
    assert '- **SPEAKER_01** (8.0–10.0 s): Budget "forty" thousand.' in markdown


def test_theme_package_is_a_section_11_1_zip(tmp_path: Path) -> None:
    path = media.theme_package(tmp_path / "t.zip")
    with zipfile.ZipFile(path) as zf:
        assert sorted(zf.namelist()) == ["preview.png", "theme.css", "theme.yaml"]
        manifest = zf.read("theme.yaml").decode()
        png = zf.read("preview.png")
    for key in ("theme_id", "name", "version", "author", "min_app_version", "is_dark", "css_entry", "preview"):
        assert re.search(rf"^{key}: \S", manifest, re.M), key
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and png.endswith(b"IEND\xaeB`\x82")


@pytest.mark.skipif(not media.shutil.which("espeak-ng"), reason="espeak-ng is not installed")
def test_the_meeting_is_two_voices_with_gaps(tmp_path: Path) -> None:
    seconds = media.make_meeting(tmp_path / "m.wav")
    with wave.open(str(tmp_path / "m.wav")) as w:
        assert w.getnchannels() == 1 and w.getsampwidth() == 2
        assert abs(w.getnframes() / w.getframerate() - seconds) < 0.01
    assert seconds > len(media.MEETING) * media.GAP_S


def test_no_espeak_is_a_typed_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(media.shutil, "which", lambda name: None)
    with pytest.raises(media.ToolMissing, match="espeak-ng is not installed"):
        media.make_meeting(tmp_path / "m.wav")


def test_steps_start_only_after_their_needs_and_all_run(tmp_path: Path) -> None:
    steps, ran = _steps({})
    run_steps(_demo(tmp_path, quiet=True), steps, io.StringIO())
    assert sorted(ran) == sorted(name for name, _, _ in STEPS)
    for name, needs, _ in STEPS:
        assert all(ran.index(need) < ran.index(name) for need in needs), (name, ran)
    assert all(s.status == "ok" for s in steps)


def test_a_failed_prepare_fails_its_step_when_it_runs(tmp_path: Path) -> None:
    steps, ran = _steps({})
    agent = next(s for s in steps if s.name == "agent")

    def prepare(_: Demo) -> None:
        raise WireError("PROVIDER_NOT_FOUND", "no preset 'nope'")

    agent.prepare = prepare
    run_steps(_demo(tmp_path, quiet=True), steps, io.StringIO())
    assert agent.status == "failed" and agent.details["error"]["code"] == "PROVIDER_NOT_FOUND"
    assert "agent" not in ran and all(s.status == "ok" for s in steps if s.name not in ("agent", "document"))
    assert next(s for s in steps if s.name == "document").status == "skipped"  # it needs the agent


class FakeClient:
    """Answers the demo's provider calls from a table; records what was asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def call(self, method: str, params: Any = None, timeout: float = 60.0) -> Any:
        self.calls.append((method, params))
        if method == "providers/create":
            pid = params.get("provider_id") or params["preset"]
            return {"provider_id": pid, "default_model": f"{params['preset']}-model"}
        if method == "chat/send":
            return {"content": "OK"}
        if method == "providers/presets":
            return {
                "items": [
                    {"preset": "deepseek", "requires_api_key": True},
                    {"preset": "ollama", "requires_api_key": False},
                ]
            }
        raise AssertionError(method)


def _agent_demo(tmp_path: Path, local: dict[str, Any], provider: str | None = None) -> tuple[Demo, FakeClient]:
    client = FakeClient()
    ns = argparse.Namespace(quiet=True, audio=None, provider=provider)
    init = {"data_dir": str(tmp_path), "capabilities": {"components": {"local_model": local}}}
    d = Demo(ns, tmp_path, client, init)  # type: ignore[arg-type]
    d.step = Step("agent", (), lambda _: None)
    return d, client


def test_prepare_agent_loads_the_embedded_model(tmp_path: Path) -> None:
    d, client = _agent_demo(tmp_path, {"available": True})
    prepare_agent(d)
    assert d.provider == {"id": "local", "model": "local-model", "kind": "local"}
    assert [m for m, _ in client.calls] == ["providers/create", "chat/send"]
    assert client.calls[1][1]["request"]["params"]["maxTokens"] == 1 and "warmup_s" in d.found


def test_prepare_agent_configures_a_named_preset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METONA_LIVE_DEEPSEEK_API_KEY", "sk-demo")
    d, client = _agent_demo(tmp_path, {"available": True}, provider="deepseek")
    prepare_agent(d)
    assert d.provider == {"id": "demo-deepseek", "model": "deepseek-model", "kind": "configured"}
    assert client.calls == [
        ("providers/presets", None),
        ("providers/create", {"preset": "deepseek", "provider_id": "demo-deepseek", "api_key": "sk-demo"}),
    ]
    # the key reaches the sidecar only in that request: never in its environment
    assert "METONA_LIVE_DEEPSEEK_API_KEY" not in _env(tmp_path)


def test_a_preset_that_needs_a_key_without_one_is_a_typed_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("METONA_LIVE_DEEPSEEK_API_KEY", raising=False)
    d, client = _agent_demo(tmp_path, {"available": True}, provider="deepseek")
    with pytest.raises(StepFailed) as failed:
        prepare_agent(d)
    assert failed.value.error["code"] == "PROVIDER_KEY_MISSING"
    assert failed.value.error["details"] == {"variable": "METONA_LIVE_DEEPSEEK_API_KEY"}
    assert [m for m, _ in client.calls] == ["providers/presets"]  # nothing configured
    d, client = _agent_demo(tmp_path, {"available": True}, provider="nope")
    with pytest.raises(StepFailed, match="no such preset") as failed:
        prepare_agent(d)
    assert failed.value.error["code"] == "PROVIDER_PRESET_UNKNOWN"


def test_a_preset_without_a_key_is_configured_without_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("METONA_LIVE_OLLAMA_API_KEY", raising=False)
    d, client = _agent_demo(tmp_path, {"available": True}, provider="ollama")
    prepare_agent(d)
    assert client.calls[-1] == ("providers/create", {"preset": "ollama", "provider_id": "demo-ollama"})
    assert key_variable("agnes-anthropic") == "METONA_LIVE_AGNES_ANTHROPIC_API_KEY"


def test_without_the_local_model_the_scripted_mock_says_so(tmp_path: Path) -> None:
    d, client = _agent_demo(tmp_path, {"available": False, "detail": "openvino-genai is not installed"})
    prepare_agent(d)
    assert d.provider["id"] is None and client.calls == []
    provider = mock_provider(d, "The launch is on Friday.", "[N1] (note n1)")
    assert provider == {"id": "demo-mock", "model": "mock-model", "kind": "mock"}
    ((method, params),) = client.calls
    assert method == "providers/create" and params["preset"] == "mock"
    turns = params["options"]["script"]["turns"]
    assert [c["name"] for c in turns[0]["tool_calls"]] == ["knowledge_search", "time.get_current_time"]
    assert turns[1]["text"] == "According to the meeting note [N1] (note n1): The launch is on Friday."


def test_binary_command_env_and_the_checkout_it_was_built_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkout = tmp_path / "clone"
    binary = checkout / engines.SHIPPED_BINARY
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    with pytest.raises(WireError) as missing:
        sidecar_command(str(binary))  # not executable
    assert missing.value.code == "SIDECAR_BINARY_NOT_FOUND"
    binary.chmod(0o755)
    assert sidecar_command(str(binary)) == [str(binary.resolve())]
    assert sidecar_command(None)[1:] == ["-m", "sidecar"]
    # the reference server and the prepared model of the checkout the binary was built in, after this package's own
    assert checkouts(str(binary))[-1] == checkout.resolve()
    server = checkout / TIME_SERVER
    server.parent.mkdir(parents=True)
    server.write_text("#!/bin/sh\n")
    assert time_server([tmp_path / "elsewhere", checkout]) == str(server)
    (checkout / ".cache" / "local-model").mkdir(parents=True)
    monkeypatch.setenv("PYTHONPATH", "/src")
    monkeypatch.setenv("VIRTUAL_ENV", "/venv")
    monkeypatch.setattr("sidecar.cli.demo.CHECKOUT", tmp_path / "no-checkout")
    monkeypatch.delenv("METONA_LOCAL_MODEL_DIR", raising=False)
    env = _env(tmp_path, str(binary))
    assert "PYTHONPATH" not in env and "VIRTUAL_ENV" not in env  # the binary never imports the demo's checkout
    assert env["METONA_LOCAL_MODEL_DIR"] == str(checkout.resolve() / ".cache" / "local-model")
    assert env["METONA_DATA_DIR"] == str(tmp_path / "data")
    assert _env(tmp_path)["PYTHONPATH"] == "/src"  # python -m sidecar runs from the demo's own tree


def test_the_question_spells_out_both_calls_as_the_model_writes_them() -> None:
    text = agent_question()
    calls = [json.loads(c) for c in re.findall(r"<tool_call>\n(.*?)\n</tool_call>", text)]
    assert calls == AGENT_CALLS
    assert [c["name"] for c in calls] == ["knowledge_search", "time.get_current_time"]


TRACE = [
    {"sequence": 1, "timestamp": 1000, "event": "ToolCall", "data": {"tool_name": "knowledge_search"}},
    {"sequence": 2, "timestamp": 1500, "event": "Citation", "data": {
        "tool_call_id": "c1", "note_id": "note_other", "block_id": "b9", "text": "Unrelated.", "citations": []}},
    {"sequence": 3, "timestamp": 1500, "event": "Citation", "data": {
        "tool_call_id": "c1", "note_id": "note_t", "note_title": "Launch", "block_id": "b1", "score": 0.9,
        "text": "[00:00–00:07] SPEAKER_00: The launch date is Friday.",
        "citations": [{"source_audio": "att_1", "start_time": 0.0, "end_time": 7.25, "speaker": "SPEAKER_00"}]}},
]  # fmt: skip


def test_the_transcript_citation_comes_from_the_traces_citation_event() -> None:
    cited = transcript_citation(TRACE, "note_t")
    assert cited == {
        "note_id": "note_t",
        "note_title": "Launch",
        "block_id": "b1",
        "text": "[00:00–00:07] SPEAKER_00: The launch date is Friday.",
        "tool_call_id": "c1",
        "source_audio": "att_1",
        "start_time": 0.0,
        "end_time": 7.25,
        "speaker": "SPEAKER_00",
    }
    assert transcript_citation(TRACE, "note_missing") is None
    assert (
        media.cited_passage(cited)
        == "note note_t block b1, attachment att_1 0.0–7.2 s SPEAKER_00: 'The launch date is Friday.'"
    )


def test_the_timeline_and_the_index_show_the_cited_passage() -> None:
    page = media.trace_timeline({"run_id": "run_1", "status": "completed"}, TRACE)
    assert "attachment att_1 0.0–7.2 s SPEAKER_00" in page and "note note_other block b9" in page
    summary = {
        "ok": True,
        "provider": {"id": "local", "kind": "local", "model": "m"},
        "steps": [{"name": "agent", "status": "ok", "seconds": 1.0, "outputs": [], "details": {
            "answer": "Friday <b>", "citation": transcript_citation(TRACE, "note_t")}}],
    }  # fmt: skip
    index = media.index_page(summary, {})
    assert "Friday &lt;b&gt;" in index and "attachment att_1 0.0–7.2 s SPEAKER_00" in index
    summary["steps"][0]["details"] = {"answer": "Friday", "citation": None, "cited_note_ids": ["note_other"]}
    assert "cites no passage of the transcript note" in media.index_page(summary, {})


def test_the_summary_note_is_written_only_after_the_agents_run(tmp_path: Path) -> None:
    """Written during the run it would join the agent's knowledge search (its hits would depend on timing)."""
    calls: list[str] = []
    drawn = threading.Event()

    class Client:
        def call(self, method: str, params: Any = None, timeout: float = 60.0) -> Any:
            calls.append(method)
            if method == "render/static":
                if calls.count("render/static") == 2:
                    drawn.set()
                return {"content": "<svg/>", "width": 10.0, "height": 10.0}
            return {"note_id": "note_s", "blocks": []}

    d = Demo(argparse.Namespace(quiet=True), tmp_path, Client(), {"data_dir": str(tmp_path)})  # type: ignore[arg-type]
    blocks = [{"text": "[00:00–00:07] SPEAKER_00: Hi.", "citations": [
        {"source_audio": "att_1", "start_time": 0.0, "end_time": 7.0, "speaker": "SPEAKER_00"}]}]  # fmt: skip
    d.found.update(blocks=blocks, note_title="Launch", note_id="note_t")
    d.finished = {"agent": threading.Event()}

    def run() -> None:
        d.step = Step("render", (), render)
        render(d)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert drawn.wait(timeout=30)  # the diagram and the plot are drawn while the agent runs
    thread.join(timeout=0.5)  # then it waits for the agent's end: a correct render never gets past it here
    assert thread.is_alive() and calls == ["render/static", "render/static"]
    d.finished["agent"].set()
    thread.join(timeout=30)
    assert not thread.is_alive() and calls[-1] == "notes/create"


def test_a_binary_that_is_not_there_exits_2_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sidecar.cli.demo import main

    out = tmp_path / "out"
    assert main(["-o", str(out), "--binary", str(tmp_path / "no-such-binary"), "--quiet"]) == 2
    assert "SIDECAR_BINARY_NOT_FOUND" in capsys.readouterr().err and not out.exists()
