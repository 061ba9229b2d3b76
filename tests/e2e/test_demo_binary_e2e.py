"""``metona-sidecar demo --binary PATH``: the demo (this venv) drives the packaged sidecar, as the app does.

Runs only where scripts/test's stage 2 names the binary (``SIDECAR_CMD=dist/metona/metona-sidecar``). What the
binary reports decides what must hold, never the demo's own outcome: a binary that reports transcription available
(``dist/metona/metona-engines/`` beside it) must walk the whole chain with every step ok; one that does not (the
sidecar built alone) must fail ``transcribe`` with the sidecar's typed error, skip exactly the steps that need it, and
still install the reference MCP server as a plugin (found in the checkout, run on its own venv's interpreter, never the
sidecar's) and run the RAG benchmark.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import speech
from tests.support.sidecar_proc import ROOT, Sidecar

BINARY = shlex.split(os.environ.get("SIDECAR_CMD", ""))

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.binary,
    pytest.mark.skipif(len(BINARY) != 1, reason="SIDECAR_CMD does not name the built binary (scripts/test stage 2)"),
    pytest.mark.skipif(not speech.have_espeak(), reason="espeak-ng is not installed"),
]

NEEDS_TRANSCRIPT = ["note", "search", "agent", "render", "export", "theme", "document"]


@pytest.fixture(scope="module")
def components(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What the binary itself reports at initialize (its own data dir)."""
    data = tmp_path_factory.mktemp("demo-binary-caps") / "data"
    data.mkdir()
    sc = Sidecar(data, dev=False)
    try:
        return dict(sc.initialize()["capabilities"]["components"])
    finally:
        sc.close()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("demo-binary") / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("METONA_LOCAL_MODEL_DIR", "SIDECAR_CMD")}
    done = subprocess.run(
        [sys.executable, "-m", "sidecar", "demo", "-o", str(out), "--binary", BINARY[0]],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=ROOT,
        check=False,
    )
    print(done.stdout)
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else None
    assert summary is not None, done.stderr[-4000:]
    return {"done": done, "out": out, "summary": summary, "steps": {s["name"]: s for s in summary["steps"]}}


def test_the_binary_is_the_sidecar_the_demo_drove(demo: dict[str, Any]) -> None:
    log = (demo["out"] / "sidecar-stderr.log").read_text(errors="replace")
    assert log.strip(), "the binary's stderr was not captured"
    assert demo["done"].returncode in (0, 1), demo["done"].stderr[-4000:]  # 2: the binary did not start
    assert "did not start" not in demo["done"].stderr
    assert "non-JSON line" not in demo["done"].stderr  # the binary's stdout is the wire only


def test_the_plugin_runs_on_the_reference_servers_own_interpreter(demo: dict[str, Any]) -> None:
    plugin = demo["steps"]["plugin"]
    assert plugin["status"] == "ok", plugin
    assert plugin["details"]["plugin_id"] == "time" and "time.get_current_time" in plugin["details"]["tools"]
    server = Path(plugin["details"]["server"])
    assert server.name == "mcp-server-time" and server.is_file()
    shebang = server.read_text(errors="replace").splitlines()[0]
    assert Path(sys.executable).parent.as_posix() not in shebang  # not the venv the demo (or sidecar) runs on
    assert demo["steps"]["benchmark"]["status"] == "ok", demo["steps"]["benchmark"]


def test_the_chain_is_what_the_binary_reports(demo: dict[str, Any], components: dict[str, Any]) -> None:
    steps, done = demo["steps"], demo["done"]
    if components["transcription"]["available"]:
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
        assert demo["summary"]["ok"] is True and all(s["status"] == "ok" for s in steps.values()), steps
        agent = steps["agent"]["details"]
        assert agent["citation_found"] is True and agent["plugin_tool_succeeded"] is True
        assert steps["note"]["details"]["note_id"] in agent["cited_note_ids"]
        kind = demo["summary"]["provider"]["kind"]
        assert kind == ("local" if components["local_model"]["available"] else "mock")
    else:
        assert done.returncode == 1 and demo["summary"]["ok"] is False
        transcribe = steps["transcribe"]
        assert transcribe["status"] == "failed"
        assert transcribe["details"]["error"]["code"] == "TRANSCRIPTION_MODEL_UNAVAILABLE", transcribe
        assert [n for n, s in steps.items() if s["status"] == "skipped"] == NEEDS_TRANSCRIPT
        assert steps["note"]["details"]["reason"] == "needs transcribe"
        assert {n for n, s in steps.items() if s["status"] == "ok"} == {"plugin", "benchmark"}
