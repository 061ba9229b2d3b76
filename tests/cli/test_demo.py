"""The demo's own logic without a sidecar: which steps run after a failure, and the files it writes."""

from __future__ import annotations

import argparse
import io
import re
import wave
import zipfile
from pathlib import Path
from typing import Any

import pytest

from sidecar.cli import demo_media as media
from sidecar.cli.demo import STEPS, Demo, Step, StepFailed, mock_provider, prepare_agent, run_steps
from sidecar.cli.wire_client import WireError


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
    }
    transcribe = steps[0]
    assert transcribe.details["error"] == {
        "code": "ESPEAK_UNAVAILABLE",
        "message": "espeak-ng is not installed",
        "details": {},
    }
    assert steps[4].details["reason"] == "needs search"
    assert "demo [1/9] transcribe failed (" in err.getvalue()
    assert "ESPEAK_UNAVAILABLE: espeak-ng is not installed" in err.getvalue()


def test_a_wire_error_fails_its_step_with_the_sidecars_code(tmp_path: Path) -> None:
    failure = WireError("PLUGIN_INCOMPATIBLE", "the plugin needs a newer app", {"method": "plugins/install"})
    steps, ran = _steps({"plugin": failure})
    err = io.StringIO()
    run_steps(_demo(tmp_path, quiet=True), steps, err)
    assert [s.name for s in steps if s.status == "failed"] == ["plugin"]
    assert [s.name for s in steps if s.status == "skipped"] == ["agent"]
    assert steps[3].details["error"]["code"] == "PLUGIN_INCOMPATIBLE"
    assert sorted(ran) == sorted(name for name, _, _ in STEPS if name != "agent")
    # quiet: only the failure is printed
    line = r"demo \[4/9\] plugin failed \(\d+\.\d s\): PLUGIN_INCOMPATIBLE: the plugin needs a newer app\n"
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
    assert "agent" not in ran and all(s.status == "ok" for s in steps if s is not agent)


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
    monkeypatch.setenv("METONA_DEMO_API_KEY", "sk-demo")
    d, client = _agent_demo(tmp_path, {"available": True}, provider="deepseek")
    prepare_agent(d)
    assert d.provider == {"id": "demo-deepseek", "model": "deepseek-model", "kind": "configured"}
    assert client.calls == [
        ("providers/create", {"preset": "deepseek", "provider_id": "demo-deepseek", "api_key": "sk-demo"})
    ]


def test_without_the_local_model_the_scripted_mock_says_so(tmp_path: Path) -> None:
    d, client = _agent_demo(tmp_path, {"available": False, "detail": "openvino-genai is not installed"})
    prepare_agent(d)
    assert d.provider["id"] is None and client.calls == []
    provider = mock_provider(d, "The launch is on Friday.", "[N1] (note n1)")
    assert provider == {"id": "demo-mock", "model": "mock-model", "kind": "mock"}
    ((method, params),) = client.calls
    assert method == "providers/create" and params["preset"] == "mock"
    turns = params["options"]["script"]["turns"]
    assert turns[0]["tool_calls"][0]["name"] == "time.get_current_time"
    assert turns[1]["text"] == "According to the meeting note [N1] (note n1): The launch is on Friday."
