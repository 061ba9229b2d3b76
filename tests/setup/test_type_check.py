"""The type checker stage of scripts/test, run on a copy of the command and its configuration over a tiny tree.

(That the real tree passes it and pytest then runs: test_setup_scripts.test_no_tests_collected_is_a_failure.)"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

UNANNOTATED = "def double(x):\n    return x * 2\n"


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    """A project root holding the real scripts/test and pyproject.toml, the shared .venv, and ``files``."""
    (tmp_path / "scripts").mkdir()
    shutil.copy2(ROOT / "scripts/test", tmp_path / "scripts/test")
    shutil.copy2(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    for rel, text in {"sidecar/__init__.py": "", **files}.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def _run(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(root / "scripts/test"), "-q", "-p", "no:cacheprovider", "-k", "zz_no_such_test_zz"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTEST_ADDOPTS=""),
        check=False,
    )


def test_a_type_error_fails_the_test_command_before_pytest(tmp_path):
    root = _tree(tmp_path, {"sidecar/storage/__init__.py": "", "sidecar/storage/bad.py": 'count: int = "three"\n'})
    proc = _run(root)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "sidecar/storage/bad.py:1: error: Incompatible types in assignment" in proc.stdout
    assert "the type checker (mypy) reported errors" in proc.stderr
    assert "collected no tests" not in proc.stderr  # pytest never ran


def test_strict_where_configured_and_standard_elsewhere(tmp_path):
    strict = ("ipc", "ir", "core", "workers")
    files = {f"sidecar/{pkg}/__init__.py": "" for pkg in (*strict, "storage")}
    files |= {f"sidecar/{pkg}/loose.py": UNANNOTATED for pkg in (*strict, "storage")}
    proc = _run(_tree(tmp_path, files))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    flagged = {line.split("/")[1] for line in proc.stdout.splitlines() if "[no-untyped-def]" in line}
    assert flagged == set(strict), proc.stdout
