"""README.md's TypeScript example (spawn the sidecar with the client, stream a chat, cancel it) runs as written:
the ```ts block of its "From Electron" section, with `repo` defined, on node against ipc_schema/client (built by
the setup); it must print REQUEST_CANCELLED (the call rejected with -32800) and exit 0. It also type-checks with
tsc --strict, and docs/quickstart.md shows the same block."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "ipc_schema" / "client"

pytestmark = pytest.mark.e2e


def readme_example() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## From Electron", 1)[1]
    match = re.search(r"```ts\n(.*?)```", section, re.S)
    assert match, "README.md has no ```ts block under 'From Electron'"
    return match[1]


def test_the_quickstart_shows_the_same_example() -> None:
    quickstart = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
    assert f"```ts\n{readme_example()}```" in quickstart, "docs/quickstart.md's example differs from README.md's"


def test_readme_example_streams_and_cancels(tmp_path: Path) -> None:
    assert (CLIENT / "dist" / "src" / "index.js").exists(), "ipc_schema/client is not built: run bash scripts/setup"
    code = readme_example()
    assert len(code.strip().splitlines()) <= 16, "keep the README example short"
    package = tmp_path / "node_modules" / "@metona" / "sidecar-client"
    package.parent.mkdir(parents=True)
    package.symlink_to(CLIENT)
    lines = code.splitlines()
    imports = [line for line in lines if line.startswith("import ")]
    body = [line for line in lines if not line.startswith("import ")]
    script = tmp_path / "example.mjs"
    script.write_text("\n".join([*imports, "const repo = process.env.METONA_REPO;", *body]) + "\n", encoding="utf-8")
    env = {
        **os.environ,
        "METONA_REPO": str(ROOT),
        "METONA_DATA_DIR": str(tmp_path / "data"),
        "METONA_SECRET_KEY_FILE": str(tmp_path / "data.key"),
    }
    env.pop("SIDECAR_CMD", None)
    if not (ROOT / ".venv" / "bin" / "python").exists():
        pytest.fail(f"{ROOT}/.venv is missing (the example spawns .venv/bin/python): run bash scripts/setup")
    proc = subprocess.run(
        ["node", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert proc.stdout.strip().splitlines()[-1] == "REQUEST_CANCELLED", proc.stdout[-2000:] + sys.version


def test_readme_example_type_checks(tmp_path: Path) -> None:
    """It is TypeScript an integrator can paste: tsc --strict against the client's sources and @types/node."""
    tsc = CLIENT / "node_modules" / ".bin" / "tsc"
    assert tsc.exists(), "ipc_schema/client's npm tools are missing: run bash scripts/setup"
    code = readme_example().replace('"@metona/sidecar-client"', json.dumps(str(CLIENT / "src" / "index.js")))
    (tmp_path / "package.json").write_text('{"type": "module"}\n', encoding="utf-8")
    (tmp_path / "example.ts").write_text("declare const repo: string;\n" + code + "export {};\n", encoding="utf-8")
    args = ["--noEmit", "--strict", "--target", "es2022", "--module", "nodenext", "--moduleResolution", "nodenext"]
    args += ["--types", "node", "--typeRoots", str(CLIENT / "node_modules" / "@types"), "example.ts"]
    proc = subprocess.run([str(tsc), *args], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
