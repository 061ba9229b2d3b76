"""The file tools: workspace confinement (../, absolute, symlinks), read/write/list/search behaviour."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from sidecar.agent.tools import ToolContext, ToolError, default_registry, resolve_in_workspace
from sidecar.agent.tools.registry import ToolExecution
from sidecar.ir import MetonaToolCall

REG = default_registry()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("top secret\n")
    return root.resolve()


async def run(tool: str, args: dict[str, Any], *roots: Path) -> ToolExecution:
    ctx = ToolContext(run_id="r", session_id="s", tool_call_id="c", workspace_roots=[str(r) for r in roots])
    return await REG.execute(MetonaToolCall(id="c", name=tool, args=args, iteration=1, timestamp=1), ctx)


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# --- confinement ------------------------------------------------------------------------------------------------


def test_resolve_relative_and_absolute(ws: Path) -> None:
    assert resolve_in_workspace("a/b.txt", [str(ws)]) == ws / "a" / "b.txt"
    assert resolve_in_workspace(str(ws / "x"), [str(ws)]) == ws / "x"
    assert resolve_in_workspace(".", [str(ws)]) == ws


@pytest.mark.parametrize("path", ["../outside/secret.txt", "a/../../outside/secret.txt", "..", "/etc/passwd"])
def test_resolve_refuses_escapes(ws: Path, path: str) -> None:
    with pytest.raises(ToolError) as info:
        resolve_in_workspace(path, [str(ws)])
    assert info.value.code == "PATH_OUTSIDE_WORKSPACE"


def test_resolve_refuses_nul_and_prefix_siblings(ws: Path) -> None:
    with pytest.raises(ToolError) as info:
        resolve_in_workspace("a\x00b", [str(ws)])
    assert info.value.code == "PATH_INVALID"
    sibling = ws.parent / (ws.name + "2")
    sibling.mkdir()
    with pytest.raises(ToolError):  # /x/ws2 is not inside /x/ws although it shares the prefix
        resolve_in_workspace(str(sibling), [str(ws)])


def test_second_root_accepts_absolute_paths(ws: Path, tmp_path: Path) -> None:
    other = (tmp_path / "outside").resolve()
    assert resolve_in_workspace(str(other / "secret.txt"), [str(ws), str(other)]) == other / "secret.txt"


@pytest.fixture
def escape_link(ws: Path, tmp_path: Path) -> Path:
    link = ws / "link"
    link.symlink_to(tmp_path / "outside", target_is_directory=True)
    (ws / "file_link.txt").symlink_to(tmp_path / "outside" / "secret.txt")
    return link


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"path": "../outside/secret.txt"}),
        ("read_file", {"path": "link/secret.txt"}),
        ("read_file", {"path": "file_link.txt"}),
        ("write_file", {"path": "../outside/new.txt", "content": "x"}),
        ("write_file", {"path": "link/new.txt", "content": "x"}),
        ("write_file", {"path": "file_link.txt", "content": "x", "mode": "overwrite"}),
        ("list_directory", {"path": "link"}),
        ("list_directory", {"path": "/"}),
        ("search_files", {"query": "secret", "path": "link"}),
        ("search_files", {"query": "secret", "path": ".."}),
    ],
)
async def test_tools_refuse_escapes(ws: Path, escape_link: Path, tool: str, args: dict[str, Any]) -> None:
    result = await run(tool, args, ws)
    assert result.error_code == "PATH_OUTSIDE_WORKSPACE"
    assert result.result.success is False
    assert (ws.parent / "outside" / "secret.txt").read_text() == "top secret\n"
    assert not (ws.parent / "outside" / "new.txt").exists()


@pytest.mark.anyio
async def test_search_does_not_read_through_links_out(ws: Path, escape_link: Path) -> None:
    (ws / "mine.txt").write_text("not a secret\n")
    result = await run("search_files", {"query": "secret"}, ws)
    assert result.error_code is None
    paths = {m["path"] for m in result.result.result["matches"]}
    assert paths == {"mine.txt"}


@pytest.mark.anyio
async def test_file_tools_unavailable_without_roots() -> None:
    result = await run("read_file", {"path": "x"})
    assert result.error_code == "TOOL_UNAVAILABLE"
    assert "agent.workspaceRoots" in (result.result.error or "")


# --- read_file --------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_read_file_ranges(ws: Path) -> None:
    (ws / "notes.txt").write_text("".join(f"line {i}\r\n" for i in range(1, 11)))
    result = await run("read_file", {"path": "notes.txt", "start_line": 3, "max_lines": 4}, ws)
    assert result.error_code is None
    assert result.result.result == {
        "path": "notes.txt",
        "start_line": 3,
        "end_line": 6,
        "total_lines": 10,
        "content": "line 3\nline 4\nline 5\nline 6",
        "truncated": True,
    }
    assert result.result.summary is not None
    assert result.result.summary.splitlines()[0].startswith("File notes.txt: lines 3-6 of 10")
    assert result.result.summary.endswith("line 6")
    full = await run("read_file", {"path": str(ws / "notes.txt")}, ws)
    assert full.result.result["truncated"] is False and full.result.result["end_line"] == 10


@pytest.mark.anyio
async def test_read_file_errors(ws: Path) -> None:
    (ws / "bin.dat").write_bytes(b"abc\x00def")
    (ws / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (ws / "short.txt").write_text("one\n")
    (ws / "sub").mkdir()
    cases = {
        "bin.dat": "BINARY_FILE",
        "latin1.txt": "BINARY_FILE",
        "missing.txt": "NOT_FOUND",
        "sub": "IS_A_DIRECTORY",
    }
    for path, code in cases.items():
        assert (await run("read_file", {"path": path}, ws)).error_code == code, path
    past = await run("read_file", {"path": "short.txt", "start_line": 5}, ws)
    assert past.error_code == "INVALID_RANGE"


@pytest.mark.anyio
async def test_read_file_size_cap(ws: Path) -> None:
    line = "x" * 99 + "\n"
    (ws / "big.txt").write_text(line * 30_000)  # ~3 MB
    result = await run("read_file", {"path": "big.txt", "max_lines": 1}, ws)
    assert result.error_code is None
    assert result.result.result["truncated"] is True
    assert result.result.result["total_lines"] == 2 * 1024 * 1024 // 100


# --- write_file -------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_write_create_refuses_existing_and_creates_parents(ws: Path) -> None:
    created = await run("write_file", {"path": "a/b/new.txt", "content": "héllo\n"}, ws)
    assert created.error_code is None
    assert created.result.result == {"path": "a/b/new.txt", "mode": "create", "bytes_written": 7, "created": True}
    assert (ws / "a" / "b" / "new.txt").read_bytes() == "héllo\n".encode()
    again = await run("write_file", {"path": "a/b/new.txt", "content": "other"}, ws)
    assert again.error_code == "FILE_EXISTS"
    assert (ws / "a" / "b" / "new.txt").read_text() == "héllo\n"


@pytest.mark.anyio
async def test_write_overwrite_is_atomic_and_append_appends(ws: Path) -> None:
    target = ws / "f.txt"
    target.write_text("old")
    os.chmod(target, 0o640)
    inode_before = target.stat().st_ino
    result = await run("write_file", {"path": "f.txt", "content": "new content", "mode": "overwrite"}, ws)
    assert result.error_code is None and result.result.result["created"] is False
    assert target.read_text() == "new content"
    assert target.stat().st_ino != inode_before  # replaced by rename, not rewritten in place
    assert target.stat().st_mode & 0o777 == 0o640
    assert listing(ws) == ["f.txt"]  # no temp file left behind
    await run("write_file", {"path": "f.txt", "content": "+more", "mode": "append"}, ws)
    assert target.read_text() == "new content+more"


@pytest.mark.anyio
async def test_write_failure_leaves_old_content(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = ws / "f.txt"
    target.write_text("keep me")

    def broken_replace(src: Any, dst: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    result = await run("write_file", {"path": "f.txt", "content": "new", "mode": "overwrite"}, ws)
    assert result.error_code == "TOOL_INTERNAL_ERROR"
    assert target.read_text() == "keep me"
    assert listing(ws) == ["f.txt"]


@pytest.mark.anyio
async def test_write_through_inside_symlink_writes_the_target(ws: Path) -> None:
    (ws / "real.txt").write_text("a")
    (ws / "alias.txt").symlink_to(ws / "real.txt")
    result = await run("write_file", {"path": "alias.txt", "content": "b", "mode": "overwrite"}, ws)
    assert result.error_code is None
    assert (ws / "real.txt").read_text() == "b"
    assert (ws / "alias.txt").is_symlink()


@pytest.mark.anyio
async def test_write_refuses_directory(ws: Path) -> None:
    (ws / "d").mkdir()
    result = await run("write_file", {"path": "d", "content": "x", "mode": "overwrite"}, ws)
    assert result.error_code == "IS_A_DIRECTORY"


# --- list_directory ---------------------------------------------------------------------------------------------


@pytest.fixture
def tree(ws: Path) -> Path:
    (ws / "b.txt").write_text("hello world\n")
    (ws / "a").mkdir()
    (ws / "a" / "inner.md").write_text("# Title\nsome Needle here\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("needle in git\n")
    (ws / "img.png").write_bytes(b"\x89PNG\x00\x00needle")
    return ws


@pytest.mark.anyio
async def test_list_directory(tree: Path) -> None:
    flat = await run("list_directory", {}, tree)
    assert flat.error_code is None
    entries = flat.result.result["entries"]
    assert [(e["path"], e["type"]) for e in entries] == [
        (".git", "dir"),
        ("a", "dir"),
        ("b.txt", "file"),
        ("img.png", "file"),
    ]
    assert entries[2]["size"] == 12
    deep = await run("list_directory", {"recursive": True}, tree)
    paths = [e["path"] for e in deep.result.result["entries"]]
    assert "a/inner.md" in paths and ".git/config" not in paths
    capped = await run("list_directory", {"recursive": True, "max_entries": 2}, tree)
    assert len(capped.result.result["entries"]) == 2 and capped.result.result["truncated"] is True
    assert (await run("list_directory", {"path": "b.txt"}, tree)).error_code == "NOT_A_DIRECTORY"
    assert (await run("list_directory", {"path": "nope"}, tree)).error_code == "NOT_FOUND"


# --- search_files -----------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_search_files(tree: Path) -> None:
    result = await run("search_files", {"query": "needle"}, tree)
    assert result.error_code is None
    assert result.result.result["matches"] == [
        {"path": "a/inner.md", "kind": "content", "line": 2, "text": "some Needle here"}
    ]
    assert "a/inner.md:2: some Needle here" in (result.result.summary or "")
    sensitive = await run("search_files", {"query": "needle", "case_sensitive": True}, tree)
    assert sensitive.result.result["matches"] == []
    by_name = await run("search_files", {"query": "inner", "glob": "*.md"}, tree)
    assert by_name.result.result["matches"] == [{"path": "a/inner.md", "kind": "name"}]
    none = await run("search_files", {"query": "hello", "glob": "*.md"}, tree)
    assert none.result.result["matches"] == []


@pytest.mark.anyio
async def test_search_files_stops_at_max_results(ws: Path) -> None:
    (ws / "many.txt").write_text("hit\n" * 100)
    result = await run("search_files", {"query": "hit", "max_results": 3}, ws)
    assert [m["line"] for m in result.result.result["matches"]] == [1, 2, 3]
    assert result.result.result["truncated"] is True
