"""The file tools: workspace confinement (../, absolute, symlinks), read/write/list/search behaviour."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.agent.tools import ToolContext, ToolError, default_registry, resolve_in_workspace
from sidecar.agent.tools import files as files_module
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
async def test_what_a_folder_holds_is_given_as_paths_from_the_workspace(ws: Path) -> None:
    (ws / "笔记" / "sub").mkdir(parents=True)
    (ws / "笔记" / "英语.md").write_text("TODO 背单词\n")
    (ws / "笔记" / "sub" / "b.md").write_text("no\n")
    found = await run("search_files", {"query": "TODO", "path": "笔记"}, ws)
    assert [m["path"] for m in found.result.result["matches"]] == ["笔记/英语.md"]
    assert "笔记/英语.md:1: TODO 背单词" in found.result.summary
    read = await run("read_file", {"path": found.result.result["matches"][0]["path"]}, ws)
    assert read.error_code is None  # what the search found can be read as given
    listed = await run("list_directory", {"path": "笔记/", "recursive": True}, ws)
    assert [e["path"] for e in listed.result.result["entries"]] == ["笔记/sub", "笔记/英语.md", "笔记/sub/b.md"]
    top = await run("search_files", {"query": "TODO"}, ws)
    assert [m["path"] for m in top.result.result["matches"]] == ["笔记/英语.md"]


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
async def test_a_read_of_a_name_cut_short_reads_the_one_file_it_can_mean(ws: Path) -> None:
    (ws / "docs").mkdir()
    (ws / "docs" / "My Notes.md").write_text("mine\n")
    (ws / "README.md").write_text("readme\n")
    (ws / "需求 说明.txt").write_text("需求\n")
    (ws / "a report.md").write_text("a\n")
    (ws / "b report.md").write_text("b\n")
    (ws / ".hidden notes.md").write_text("x\n")
    (ws / ".old x9.md").write_text("x\n")
    (ws / "项目资料").mkdir()
    (ws / "项目资料" / "需求说明.txt").write_text("需求说明\n")
    (ws / "My Recipes").mkdir()
    (ws / "My Recipes" / "pancakes.md").write_text("eggs\n")
    (ws / "NOTES").write_text("port 8443\n")
    (ws / "Project Docs" / "2024").mkdir(parents=True)
    (ws / "Project Docs" / "2024" / "notes v2.md").write_text("contact: Raman\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "old v3.md").write_text("x\n")
    (ws / "a" / "b").mkdir(parents=True)
    (ws / "a" / "b" / "plan v3.md").write_text("x\n")
    (ws / "c").mkdir()
    (ws / "c" / "draft v3.md").write_text("x\n")
    read = {  # a name with spaces cut at its first word, a name without its extension, another letter case
        "docs/Notes.md": ("docs/My Notes.md", "mine"),
        "README": ("README.md", "readme"),
        "说明.txt": ("需求 说明.txt", "需求"),
        "读一下项目资料/读一下项目资料目录下的需求说明.txt": (
            "项目资料/需求说明.txt",
            "需求说明",
        ),  # Chinese words glued on
        "Recipes/pancakes.md": ("My Recipes/pancakes.md", "eggs"),  # the folder's name cut at its first word
        "the README.md": ("README.md", "readme"),
        "NOTES.txt": ("NOTES", "port 8443"),  # an extension the file has not
        "v2.md": ("Project Docs/2024/notes v2.md", "contact: Raman"),  # the path cut at a space: the one below
    }
    if not (ws / "readme.MD").exists():  # a file system that tells letter case apart
        read["readme.MD"] = ("README.md", "readme")
    for asked, (path, content) in read.items():
        result = await run("read_file", {"path": asked}, ws)
        assert result.error_code is None, asked
        assert result.result.result["path"] == path and result.result.result["content"] == content
        assert result.result.summary is not None
        assert result.result.summary.startswith(f"File {path} (there is no {asked}: the one file it can mean)")
    two = await run("read_file", {"path": "report.md"}, ws)  # two files it can mean: neither is read
    assert two.error_code == "NOT_FOUND"
    assert "'a report.md' or 'b report.md'" in (two.result.error or "")
    below = await run("read_file", {"path": "v3.md"}, ws)  # two below (a hidden folder's is not offered)
    assert below.error_code == "NOT_FOUND"
    assert "(did you mean 'a/b/plan v3.md' or 'c/draft v3.md'?)" in (below.result.error or "")
    for path in ("x9.md", "Other.txt", "docs/Other.md", "nowhere/Notes.md", "ME.md", "明.txt", "xdocs/My Notes.md"):
        # no hidden file, nothing else, no folder; not a name's last letters ("ME.md" of README.md, one character
        # before the extension), not after a letter
        assert (await run("read_file", {"path": path}, ws)).error_code == "NOT_FOUND", path
    assert not (ws / "Notes.md").exists()


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

    def broken_replace(src: Any, dst: Any, **dir_fds: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    result = await run("write_file", {"path": "f.txt", "content": "new", "mode": "overwrite"}, ws)
    assert result.error_code == "NO_SPACE"  # a model-readable error, not TOOL_INTERNAL_ERROR
    assert result.result.error == "f.txt: No space left on device"
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
    assert (result.result.summary or "").splitlines()[0].endswith("; 1 file: a/inner.md")
    (tree / "c.md").write_text("needle\nneedle again\n", encoding="utf-8")
    two = (await run("search_files", {"query": "needle"}, tree)).result.summary or ""
    assert two.splitlines()[0] == "3 matches for 'needle' in .; 2 files: c.md, a/inner.md"  # each file once, first
    (tree / "c.md").unlink()
    sensitive = await run("search_files", {"query": "needle", "case_sensitive": True}, tree)
    assert sensitive.result.result["matches"] == []
    by_name = await run("search_files", {"query": "inner", "glob": "*.md"}, tree)
    assert by_name.result.result["matches"] == [{"path": "a/inner.md", "kind": "name"}]
    none = await run("search_files", {"query": "hello", "glob": "*.md"}, tree)
    assert none.result.result["matches"] == []


@pytest.mark.anyio
async def test_search_files_falls_back_to_the_longest_part_of_a_chinese_text_a_file_holds(ws: Path) -> None:
    (ws / "生活").mkdir()
    (ws / "生活" / "物业.txt").write_text("物业服务中心\n门禁密码：#2580\n", encoding="utf-8")
    (ws / "生活" / "快递.txt").write_text("密码锁的电池该换了\n", encoding="utf-8")
    result = await run("search_files", {"query": "小区门禁密码"}, ws)
    out = result.result.result
    assert (out["matched"], out["part"]) == ("part", "门禁密码")  # the longest part any file holds: not "密码"
    assert out["matches"] == [{"path": "生活/物业.txt", "kind": "content", "line": 2, "text": "门禁密码：#2580"}]
    assert "'门禁密码', the longest part of '小区门禁密码' any file holds" in (result.result.summary or "")
    assert (await run("search_files", {"query": "门禁密码"}, ws)).result.result.get("matched") is None  # whole
    none = await run("search_files", {"query": "停车位编号"}, ws)
    assert none.result.result["matches"] == [] and "matched" not in none.result.result
    english = await run("search_files", {"query": "gate code"}, ws)  # no Chinese run: no parts
    assert english.result.result["matches"] == []


@pytest.mark.anyio
async def test_search_files_falls_back_to_the_files_that_hold_every_word(ws: Path) -> None:
    (ws / "docs").mkdir()
    (ws / "docs" / "api.md").write_text("# API\n\nRate limits: 100 requests a minute.\nAuth: a key.\n")
    (ws / "docs" / "faq.md").write_text("What is the rate of change?\n")
    (ws / "docs" / "limits-api.txt").write_text("nothing else\n")
    result = await run("search_files", {"query": "API rate limit", "path": "docs"}, ws)
    assert result.error_code is None
    out = result.result.result
    assert out["matched"] == "all words"
    assert out["matches"] == [
        {"path": "docs/api.md", "kind": "content", "line": 1, "text": "# API"},
        {"path": "docs/api.md", "kind": "content", "line": 3, "text": "Rate limits: 100 requests a minute."},
    ]  # faq.md lacks "API" and "limit"; limits-api.txt lacks "rate"
    assert "the words of 'API rate limit' (no line holds it whole)" in (result.result.summary or "")
    whole = await run("search_files", {"query": "Rate limits", "path": "docs"}, ws)
    assert "matched" not in whole.result.result and len(whole.result.result["matches"]) == 1
    one_word = await run("search_files", {"query": "quota", "path": "docs"}, ws)
    assert one_word.result.result["matches"] == [] and "matched" not in one_word.result.result
    named = await run("search_files", {"query": "limits api", "path": "docs", "glob": "*.txt"}, ws)
    assert named.result.result["matches"] == [{"path": "docs/limits-api.txt", "kind": "name"}]


@pytest.mark.anyio
async def test_a_search_for_a_name_pattern_finds_the_names_it_fits(ws: Path) -> None:
    (ws / "销售").mkdir()
    (ws / "销售" / "销售-一季度.CSV").write_text("月份,金额\n")
    (ws / "客户名单.csv").write_text("name\n")
    (ws / "notes.md").write_text("export as *.csv every week\n")
    result = await run("search_files", {"query": "*.csv"}, ws)
    assert result.error_code is None
    assert result.result.result["matches"] == [
        {"path": "notes.md", "kind": "content", "line": 1, "text": "export as *.csv every week"},  # as text too
        {"path": "客户名单.csv", "kind": "name"},
        {"path": "销售/销售-一季度.CSV", "kind": "name"},  # letter case as the search's
    ]
    sensitive = await run("search_files", {"query": "*.csv", "glob": "*.csv", "case_sensitive": True}, ws)
    assert sensitive.result.result["matches"] == [{"path": "客户名单.csv", "kind": "name"}]
    one = await run("search_files", {"query": "客户名单.cs?"}, ws)
    assert one.result.result["matches"] == [{"path": "客户名单.csv", "kind": "name"}]


@pytest.mark.anyio
async def test_search_files_stops_at_max_results(ws: Path) -> None:
    (ws / "many.txt").write_text("hit\n" * 100)
    result = await run("search_files", {"query": "hit", "max_results": 3}, ws)
    assert [m["line"] for m in result.result.result["matches"]] == [1, 2, 3]
    assert result.result.result["truncated"] is True


# --- special files, hard links, OS errors, threads ---------------------------------------------------------------


@pytest.fixture
def fifo(ws: Path) -> Any:
    """A FIFO in the workspace; a guard thread opens it after 2 s so that a tool blocking on it is released."""
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    path = ws / "pipe"
    os.mkfifo(path)
    done = threading.Event()

    def guard() -> None:
        if not done.wait(2):
            fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)  # releases a blocked reader or writer
            time.sleep(0.2)
            os.close(fd)

    thread = threading.Thread(target=guard, daemon=True)
    thread.start()
    yield path
    done.set()
    thread.join()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"path": "pipe"}),
        ("write_file", {"path": "pipe", "content": "x", "mode": "append"}),
        ("write_file", {"path": "pipe", "content": "x", "mode": "overwrite"}),
    ],
)
async def test_special_files_are_refused_without_blocking(
    ws: Path, fifo: Path, tool: str, args: dict[str, Any]
) -> None:
    started = time.monotonic()
    result = await run(tool, args, ws)
    assert result.error_code == "NOT_A_FILE"
    assert time.monotonic() - started < 1.5
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # not replaced by a regular file either


@pytest.mark.anyio
async def test_search_skips_special_files_without_blocking(ws: Path, fifo: Path) -> None:
    (ws / "a.txt").write_text("hello\n")
    (ws / "pipe_link").symlink_to(fifo)
    started = time.monotonic()
    result = await run("search_files", {"query": "hello"}, ws)
    assert time.monotonic() - started < 1.5
    assert result.error_code is None
    assert result.result.result["matches"] == [{"path": "a.txt", "kind": "content", "line": 1, "text": "hello"}]


@pytest.mark.anyio
async def test_append_refuses_a_hard_link_to_outside(ws: Path) -> None:
    outside = ws.parent / "outside" / "secret.txt"
    os.link(outside, ws / "innocent.txt")
    result = await run("write_file", {"path": "innocent.txt", "content": "INJECTED\n", "mode": "append"}, ws)
    assert result.error_code == "HARD_LINKED"
    assert outside.read_text() == "top secret\n"
    replaced = await run("write_file", {"path": "innocent.txt", "content": "mine\n", "mode": "overwrite"}, ws)
    assert replaced.error_code is None  # overwrite renames a new file over the name: the other name is untouched
    assert outside.read_text() == "top secret\n" and (ws / "innocent.txt").read_text() == "mine\n"


@pytest.mark.anyio
async def test_os_errors_become_readable_tool_errors(ws: Path) -> None:
    (ws / "file.txt").write_text("x\n")
    (ws / "self").symlink_to("self")
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("read_file", {"path": "file.txt/child"}, "NOT_A_DIRECTORY"),
        ("read_file", {"path": "self"}, "SYMLINK_LOOP"),
        ("write_file", {"path": "file.txt/child.txt", "content": "x"}, "NOT_A_DIRECTORY"),
    ]
    for tool, args, code in cases:
        result = await run(tool, args, ws)
        assert result.error_code == code, (tool, args)
        assert (result.result.error or "").startswith(args["path"]), result.result.error


@pytest.mark.anyio
async def test_write_a_255_byte_file_name(ws: Path) -> None:
    name = "n" * 252 + ".md"
    for mode in ("create", "overwrite"):
        result = await run("write_file", {"path": name, "content": mode, "mode": mode}, ws)
        assert result.error_code is None, result.result.error
    assert listing(ws) == [name] and (ws / name).read_text() == "overwrite"


@pytest.mark.anyio
async def test_read_file_thread_is_abandoned_on_timeout(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (ws / "f.txt").write_text("x\n")
    monkeypatch.setattr(files_module, "_read_head", lambda real: time.sleep(1.5))  # a hung mount
    monkeypatch.setattr(files_module.ReadFile, "timeout_ms", 100)
    started = time.monotonic()
    result = await run("read_file", {"path": "f.txt"}, ws)
    assert result.error_code == "TOOL_TIMEOUT"
    assert time.monotonic() - started < 1.0


@pytest.mark.anyio
async def test_no_file_system_calls_on_the_event_loop(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (ws / "a").mkdir()
    (ws / "a" / "f.txt").write_text("hi\n")
    loop_thread = threading.get_ident()
    on_loop: list[str] = []
    real_realpath, real_stat = os.path.realpath, os.stat

    def realpath(path: Any, *a: Any, **k: Any) -> Any:
        if threading.get_ident() == loop_thread:
            on_loop.append(f"realpath {path}")
        return real_realpath(path, *a, **k)

    def stat(path: Any, *a: Any, **k: Any) -> Any:
        if threading.get_ident() == loop_thread:
            on_loop.append(f"stat {path}")
        return real_stat(path, *a, **k)

    monkeypatch.setattr(os.path, "realpath", realpath)
    monkeypatch.setattr(os, "stat", stat)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("read_file", {"path": "a/f.txt"}),
        ("write_file", {"path": "a/g.txt", "content": "x"}),
        ("list_directory", {"path": "a"}),
        ("search_files", {"query": "hi", "path": "a"}),
    ]
    for tool, args in calls:
        result = await run(tool, args, ws)
        assert result.error_code is None, (tool, result.result.error)
    assert on_loop == []


@pytest.mark.anyio
async def test_unresolved_root_still_confines_and_shows_relative_paths(ws: Path, tmp_path: Path) -> None:
    (ws / "f.txt").write_text("hi\n")
    alias = tmp_path / "alias"
    alias.symlink_to(ws, target_is_directory=True)
    result = await run("read_file", {"path": "f.txt"}, alias)
    assert result.error_code is None and result.result.result["path"] == "f.txt"
    assert (await run("read_file", {"path": "../outside/secret.txt"}, alias)).error_code == "PATH_OUTSIDE_WORKSPACE"
    listed = await run("search_files", {"query": "hi"}, alias)
    assert [m["path"] for m in listed.result.result["matches"]] == ["f.txt"]


def test_search_walk_checks_the_stop_flag_per_folder(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(20):
        (ws / f"d{i}" / "x").mkdir(parents=True)
    visited: list[str] = []
    real_walk = os.walk

    def counting_walk(top: Any, *a: Any, **k: Any) -> Any:
        for item in real_walk(top, *a, **k):
            visited.append(item[0])
            yield item

    monkeypatch.setattr(files_module.os, "walk", counting_walk)
    stop = threading.Event()
    stop.set()  # the call was abandoned
    args = files_module.SearchFilesParams(query="q", glob="*.nomatch")
    assert files_module._search(ws, args, [str(ws)], stop) == ([], False, 0)
    assert len(visited) <= 1


@pytest.mark.anyio
async def test_cancelling_a_read_returns_at_once(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (ws / "f.txt").write_text("x\n")
    monkeypatch.setattr(files_module, "_read_head", lambda real: time.sleep(1.5))
    started = time.monotonic()
    with anyio.move_on_after(0.1):
        await run("read_file", {"path": "f.txt"}, ws)
    assert time.monotonic() - started < 1.0


# --- issue 21: the check and the use are one walk -----------------------------------------------------------------


def _swap_after_check(monkeypatch: pytest.MonkeyPatch, folder: Path, target: Path) -> None:
    """After the path was checked, ``folder`` is replaced by a symlink to ``target`` (the race, made certain)."""
    original = files_module._locate

    def locate(path: str, roots: Any) -> Any:
        where = original(path, roots)
        if not folder.is_symlink():
            shutil.rmtree(folder)
            folder.symlink_to(target, target_is_directory=True)
        return where

    monkeypatch.setattr(files_module, "_locate", locate)


@pytest.mark.anyio
async def test_a_parent_swapped_for_a_symlink_after_the_check_is_not_followed_by_read(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "sub").mkdir()
    (ws / "sub" / "secret.txt").write_text("harmless\n")
    _swap_after_check(monkeypatch, ws / "sub", ws.parent / "outside")
    result = await run("read_file", {"path": "sub/secret.txt"}, ws)
    assert result.error_code == "PATH_OUTSIDE_WORKSPACE", result
    assert "top secret" not in str(result.result.model_dump())


@pytest.mark.anyio
async def test_a_parent_swapped_for_a_symlink_after_the_check_is_not_followed_by_write(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for mode in ("create", "overwrite", "append"):
        (ws / "sub").unlink(missing_ok=True)
        (ws / "sub").mkdir()
        _swap_after_check(monkeypatch, ws / "sub", ws.parent / "outside")
        result = await run("write_file", {"path": "sub/secret.txt", "content": "pwned", "mode": mode}, ws)
        assert result.error_code == "PATH_OUTSIDE_WORKSPACE", (mode, result)
        assert (ws.parent / "outside" / "secret.txt").read_text() == "top secret\n"
        assert listing(ws.parent / "outside") == ["secret.txt"]


@pytest.mark.anyio
async def test_read_and_search_refuse_a_hard_link_to_a_file_outside(ws: Path) -> None:
    os.link(ws.parent / "outside" / "secret.txt", ws / "linked.txt")
    result = await run("read_file", {"path": "linked.txt"}, ws)
    assert result.error_code == "HARD_LINKED", result
    found = await run("search_files", {"query": "top secret"}, ws)
    assert found.error_code is None and found.result.result["matches"] == []


@pytest.mark.anyio
@pytest.mark.parametrize("listed", ["sub", "sub/deeper"])
async def test_a_folder_swapped_for_a_symlink_after_the_check_is_not_listed_through(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listed: str
) -> None:
    """The listed folder itself, or a parent of it, becomes a link out of the workspace after the check."""
    (tmp_path / "outside" / "deeper").mkdir()
    (tmp_path / "outside" / "deeper" / "also-secret.txt").write_text("top secret\n")
    (ws / "sub" / "deeper").mkdir(parents=True)
    _swap_after_check(monkeypatch, ws / "sub", tmp_path / "outside")
    for recursive in (False, True):
        result = await run("list_directory", {"path": listed, "recursive": recursive}, ws)
        assert result.error_code == "PATH_OUTSIDE_WORKSPACE", result
        assert "secret" not in str(result.result.model_dump())


def test_the_component_walk_refuses_a_symlinked_component(ws: Path, tmp_path: Path) -> None:
    """The walk itself, given resolved paths whose components were made symlinks beforehand (no race needed)."""
    (tmp_path / "outside" / "deeper").mkdir()
    (ws / "real" / "deeper").mkdir(parents=True)
    (ws / "sub").symlink_to(tmp_path / "outside", target_is_directory=True)
    (ws / "real" / "link").symlink_to(ws / "real" / "deeper", target_is_directory=True)  # inside, still refused
    for folder in (ws / "sub", ws / "sub" / "deeper", ws / "real" / "link"):
        with pytest.raises(ToolError) as info:
            os.close(files_module._open_folder(folder, [str(ws)]))
        assert info.value.code == "PATH_OUTSIDE_WORKSPACE", folder
    with pytest.raises(ToolError) as info:
        files_module._beneath(ws / "sub" / "deeper" / "f.txt", [str(ws)]).close()
    assert info.value.code == "PATH_OUTSIDE_WORKSPACE"
    fd = files_module._open_folder(ws / "real" / "deeper", [str(ws)])
    try:
        assert os.path.samestat(os.fstat(fd), os.stat(ws / "real" / "deeper"))
    finally:
        os.close(fd)
    with pytest.raises(FileNotFoundError):
        files_module._open_folder(ws / "missing", [str(ws)])


@pytest.mark.anyio
async def test_list_directory_reports_a_missing_folder_and_a_file(ws: Path) -> None:
    (ws / "f.txt").write_text("x")
    assert (await run("list_directory", {"path": "nope"}, ws)).error_code == "NOT_FOUND"
    assert (await run("list_directory", {"path": "f.txt"}, ws)).error_code == "NOT_A_DIRECTORY"
    (ws / "d" / "e").mkdir(parents=True)
    (ws / "d" / "e" / "g.txt").write_text("yy")
    (ws / "d" / "ln").symlink_to(ws / "d" / "e", target_is_directory=True)
    listed = await run("list_directory", {"path": ".", "recursive": True}, ws)
    assert listed.result.result["entries"] == [
        {"path": "d", "type": "dir"},
        {"path": "f.txt", "type": "file", "size": 1},
        {"path": "d/e", "type": "dir"},
        {"path": "d/ln", "type": "symlink"},
        {"path": "d/e/g.txt", "type": "file", "size": 2},
    ]
