"""``metona-sidecar transcribe``: transcript on stdout (SRT here), progress and errors on stderr (the binary's runs its
worker from the engines folder beside it)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.support import speech
from tests.support.sidecar_proc import ROOT, sidecar_cmd

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not speech.have_espeak(), reason="espeak-ng is not installed")]


def _transcribe(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "METONA_DATA_DIR": str(tmp_path / "data")}
    return subprocess.run(
        [*sidecar_cmd(), "transcribe", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )


def test_transcribe_to_srt(tmp_path: Path) -> None:
    wav = tmp_path / "meeting.wav"
    turns = speech.conversation(wav, speech.TURNS[:2])
    done = _transcribe(tmp_path, str(wav), "--profile", "en-fast", "--format", "srt")
    assert done.returncode == 0, done.stderr
    cues = done.stdout.strip().split("\n\n")
    assert len(cues) >= 2
    for i, cue in enumerate(cues, 1):
        number, times, *text = cue.split("\n")
        assert number == str(i)
        assert re.fullmatch(r"\d\d:\d\d:\d\d,\d{3} --> \d\d:\d\d:\d\d,\d{3}", times)
        assert text
    assert speech.wer(" ".join(t.text for t in turns), " ".join(c.split("\n", 2)[2] for c in cues)) < 0.25
    assert "%" in done.stderr  # the progress bar


def test_transcribe_refuses_a_text_file(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not audio\n")
    done = _transcribe(tmp_path, str(text), "--profile", "en-fast", "--quiet")
    assert done.returncode == 2 and done.stdout == ""
    assert "UNSUPPORTED_AUDIO_FORMAT" in done.stderr
