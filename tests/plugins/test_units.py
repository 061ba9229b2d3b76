"""Units of the plugin domain: the manifest (and its generated JSON Schema), the stdout filter, staging."""

from __future__ import annotations

import json
import warnings
import zipfile
from pathlib import Path

import anyio
import jsonschema
import pytest

from sidecar.core.errors import BadRequestError
from sidecar.mcp_host.transport import RESULT_TOO_LARGE_CODE, StdoutFilter, resolve_command
from sidecar.plugins.package import parse_manifest, stage

ROOT = Path(__file__).resolve().parents[2]
ISSUE_EXAMPLE = {
    "id": "time", "name": "Time", "version": "1.0.0", "description": "…", "min_app_version": "0.1.0",
    "backend": {"type": "mcp", "transport": "stdio", "command": "python", "args": ["-m", "mcp_server_time"],
                "env": {}, "cwd": None},
    "permissions": ["tools"],
    "tools": {"timeout_ms": 30000, "max_result_bytes": 1048576, "risk": {"set_time": "high"}},
    "contributes": {"commands": [], "settings": {"schema_version": 1, "fields": []}},
}  # fmt: skip


def test_the_issue_example_is_a_valid_manifest_in_code_and_in_the_schema() -> None:
    manifest = parse_manifest(ISSUE_EXAMPLE)
    assert manifest.tools.risk == {"set_time": "high"}
    schema = json.loads((ROOT / "ipc_schema" / "defs" / "plugin-manifest.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(ISSUE_EXAMPLE)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate({**ISSUE_EXAMPLE, "extra": 1})


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"id": "Time"}, "id"),
        ({"backend": {**ISSUE_EXAMPLE["backend"], "shell": True}}, "backend/shell"),
        ({"tools": {"risk": {"x": "scary"}}}, "tools/risk/x"),
        ({"tools": {"examples": {"x": [""]}}}, "tools/examples/x/0"),
        ({"tools": {"examples": {"x": ["a"] * 9}}}, "tools/examples"),
        ({"contributes": {"commands": [{"command_id": "c", "title": "C", "tool": "t", "when": ["js:alert(1)"]}]}},
         "contributes/commands/0"),
    ],
)  # fmt: skip
def test_manifest_errors_carry_their_path(change: dict[str, object], path: str) -> None:
    with pytest.raises(BadRequestError) as caught:
        parse_manifest({**ISSUE_EXAMPLE, **change})
    assert caught.value.code == "PLUGIN_MANIFEST_INVALID"
    assert any(e["path"].startswith(path) for e in caught.value.details["errors"]), caught.value.details


class _Chunks:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self.chunks:
            raise anyio.EndOfStream
        return self.chunks.pop(0)


def _drain(chunks: list[bytes], limit: int = 100) -> tuple[list[bytes], StdoutFilter]:
    filt = StdoutFilter(_Chunks(chunks), limit)  # type: ignore[arg-type]

    async def run() -> list[bytes]:
        out = []
        try:
            while True:
                out.append(await filt.receive())
        except anyio.EndOfStream:
            return out

    return anyio.run(run), filt


def test_stdout_filter_drops_garbage_and_answers_oversized_lines() -> None:
    big_head = b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"' + b"x" * 300
    big_tail = b'{"result":{"x":"' + b"y" * 300 + b'"},"jsonrpc":"2.0","id":"abc"}\n'
    out, filt = _drain([b'hello world\n{"a"', b":1}\n", big_head, b"x" * 500 + b'"}]}}\n', big_tail, b"\n  \n"])
    assert out[0] == b'{"a":1}\n'
    first, second = (json.loads(x) for x in out[1:])
    assert first["id"] == 7 and first["error"]["code"] == RESULT_TOO_LARGE_CODE
    assert second["id"] == "abc" and "exceeded" in second["error"]["message"]
    assert filt.garbage_lines == 1 and filt.oversized_lines == 2 and filt.last_garbage == "hello world"


def test_staging_refuses_a_zip_slip_and_keeps_nothing_outside(tmp_path: Path) -> None:
    archive = tmp_path / "p.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("plugin.json", json.dumps(ISSUE_EXAMPLE))
        z.writestr("a/../../evil", "x")
    with pytest.raises(BadRequestError, match="zip-slip"):
        stage(archive, tmp_path / "staging")
    assert not (tmp_path / "evil").exists()


@pytest.mark.parametrize(
    "entries",
    [
        [("plugin.json", "{}"), ("plugin.json", "{}")],  # a duplicate entry
        [("a", "x"), ("a/b", "y")],  # a file, then a folder of the same name
        [("a/b", "x"), ("a", "y")],  # a folder, then a file of the same name
        [(".", "x")],  # the package root as a file
    ],
)
def test_staging_refuses_duplicate_and_conflicting_zip_entries(tmp_path: Path, entries: list) -> None:
    # review: these were FileExistsError → INTERNAL_ERROR over the wire
    archive = tmp_path / "p.zip"
    with warnings.catch_warnings(), zipfile.ZipFile(archive, "w") as z:
        warnings.simplefilter("ignore")  # zipfile warns on a duplicate name
        for name, data in entries:
            z.writestr(name, data)
    with pytest.raises(BadRequestError, match="duplicate or conflicting") as caught:
        stage(archive, tmp_path / "staging")
    assert caught.value.code == "PLUGIN_PACKAGE_INVALID"


def test_commands_resolve_relative_to_the_plugin_or_on_path(tmp_path: Path) -> None:
    tool = tmp_path / "bin" / "run"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert resolve_command("bin/run", tmp_path, "") == str(tool)
    assert resolve_command("run", tmp_path, str(tool.parent)) == str(tool)
    assert resolve_command("run", tmp_path, "/nonexistent") is None
    assert resolve_command("../outside", tmp_path, "") is None
