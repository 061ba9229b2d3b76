"""Tests of the setup work: the one-command scripts and the pinned npm tools."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_shell_scripts_parse():
    for rel in ("scripts/setup", "scripts/test", ".ci/run", "build/build.sh"):
        proc = subprocess.run(["bash", "-n", str(ROOT / rel)], capture_output=True, text=True, check=False)
        assert proc.returncode == 0, f"{rel}: {proc.stderr}"


def test_no_tests_collected_is_a_failure():
    env = dict(os.environ, PYTEST_ADDOPTS="")
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts/test"), "tests/setup", "-q", "-k", "zz_no_such_test_zz", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "collected no tests" in proc.stderr


def test_lock_pins_cpu_torch():
    lock = (ROOT / "requirements.lock").read_text()
    pins = re.findall(r"^torch==(\S+)", lock, flags=re.M)
    assert pins and all(p.endswith("+cpu") for p in pins), pins
    assert not re.search(r"^(nvidia|triton)", lock, flags=re.M | re.I)


def test_ts_tools_are_pinned_exactly_and_locked():
    pkg = json.loads((ROOT / "tools/ts/package.json").read_text())
    lock = json.loads((ROOT / "tools/ts/package-lock.json").read_text())
    deps = pkg["devDependencies"]
    assert set(deps) >= {"json-schema-to-typescript", "typescript"}
    for name, spec in deps.items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", spec), f"{name} must be pinned exactly, got {spec!r}"
        assert lock["packages"][f"node_modules/{name}"]["version"] == spec
    assert lock["packages"][""]["devDependencies"] == deps


def test_ts_client_has_no_runtime_dependencies_and_the_tools_typescript():
    client = ROOT / "ipc_schema/client"
    pkg = json.loads((client / "package.json").read_text())
    lock = json.loads((client / "package-lock.json").read_text())
    assert "dependencies" not in pkg and "dependencies" not in lock["packages"][""], "no runtime dependencies"
    deps = pkg["devDependencies"]
    for name, spec in deps.items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", spec), f"{name} must be pinned exactly, got {spec!r}"
        assert lock["packages"][f"node_modules/{name}"]["version"] == spec
    tools = json.loads((ROOT / "tools/ts/package.json").read_text())["devDependencies"]
    assert deps["typescript"] == tools["typescript"], "the client builds with the typescript tools/ts pins"
    assert {"/dist/", "/node_modules/"} <= set((client / ".gitignore").read_text().split())
