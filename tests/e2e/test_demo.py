"""The README's second command (scripts/demo.py: the main jobs on the embedded defaults) keeps working."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def test_demo_runs_on_the_embedded_defaults(tmp_path: Path) -> None:
    cmd = [sys.executable, str(ROOT / "scripts" / "demo.py"), "--data-dir", str(tmp_path / "data")]
    binary = os.environ.get("SIDECAR_CMD")
    if binary:
        cmd += ["--binary", binary]
    env = dict(os.environ, METONA_SECRET_KEY_FILE=str(tmp_path / "master.key"))
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert '"你好！我是 Metona。How can I help?"' in out
    assert 'memory/search: ["更正：我现在住在上海"]' in out
    assert "服务器宕机的原因是磁盘被日志占满。" in out and "PostgreSQL" in out
    assert "宕机原因：磁盘被日志占满" in out and 'incident.md: "磁盘被日志占满"' in out
    assert '"PermissionResolved"' in out and '"RunCompleted"]' in out
    assert out.rstrip().endswith("sidecar exited with 0")
