"""The four file tools (read, write, list, search), confined to the configured workspace folders.

Every path goes through :func:`resolve_in_workspace`: symlinks are followed first, and only then is the result
checked against the roots, so neither ``../`` nor a link pointing outside escapes. All file-system calls,
resolving the path included, run in a worker thread, never on the event loop; read, list and search abandon
that thread when the call times out or the run is cancelled (a write is waited for, so its result is known).

The check and the use are one walk (issue 21): a file is opened, and a file written, relative to its folder's
descriptor, which :func:`_beneath` opens from the resolved root one component at a time with ``O_NOFOLLOW`` — a
folder swapped for a symlink after the check is refused (``PATH_OUTSIDE_WORKSPACE``), never followed out. A
folder is listed through its own descriptor, opened by the same walk (:func:`_open_folder`), and its subfolders
through theirs, opened from it. Files
are opened through :func:`_open_regular` (non-blocking, no final symlink, checked with ``fstat``): anything but a
regular file (a FIFO, socket or device) is refused with ``NOT_A_FILE`` instead of blocking, and reading or
appending to a file with more than one hard link (``HARD_LINKED``) is refused, since the other name may lie
outside the workspace. ``search_files`` skips such files. An ``OSError`` becomes a ``ToolError`` whose code
names the errno (``NOT_A_DIRECTORY``, ``SYMLINK_LOOP``, ``PERMISSION_DENIED_BY_OS``, ``NAME_TOO_LONG``,
``NO_SPACE``, else ``OS_ERROR``).
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
import re
import stat
import threading
import uuid
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import anyio
import anyio.to_thread
from pydantic import Field

from sidecar.ir import MetonaRiskLevel, MetonaToolCategory

from .base import Tool, ToolContext, ToolError, ToolOutput, ToolParams

MAX_READ_BYTES = 2 * 1024 * 1024
MAX_WRITE_BYTES = 5 * 1024 * 1024
MAX_SEARCH_FILE_BYTES = 2 * 1024 * 1024
EXCERPT_CHARS = 200
SKIPPED_DIRS = frozenset({"node_modules", "__pycache__"})
"""Never descended into by list (recursive) and search, besides every hidden (``.``) folder."""
NO_WORKSPACE = "no workspace folder is configured (config agent.workspaceRoots)"

_OPEN_FLAGS = (
    getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
_ERRNO_CODES = {
    errno.ENOENT: "NOT_FOUND",
    errno.ENOTDIR: "NOT_A_DIRECTORY",
    errno.EISDIR: "IS_A_DIRECTORY",
    errno.ELOOP: "SYMLINK_LOOP",
    errno.EACCES: "PERMISSION_DENIED_BY_OS",
    errno.EPERM: "PERMISSION_DENIED_BY_OS",
    errno.ENAMETOOLONG: "NAME_TOO_LONG",
    errno.ENOSPC: "NO_SPACE",
    getattr(errno, "EDQUOT", errno.ENOSPC): "NO_SPACE",
}
_T = TypeVar("_T")


# --- confinement -----------------------------------------------------------------------------------------------


def resolve_in_workspace(path: str, roots: Sequence[str]) -> Path:
    """The real path ``path`` names, if it lies inside one of ``roots``; else ``ToolError``.

    A relative path is taken from the first root. Symlinks are resolved (``os.path.realpath``) before the
    check, so a link that points outside is refused. A path that does not exist yet resolves through its
    existing parents, which is what ``write_file`` needs. Blocking (file-system calls): run it in a thread.
    """
    return _resolve(path, roots, _real_roots(roots))


def _real_roots(roots: Sequence[str]) -> list[str]:
    return [os.path.realpath(root) for root in roots]


def _resolve(path: str, roots: Sequence[str], real_roots: Sequence[str]) -> Path:
    """:func:`resolve_in_workspace` with the roots already resolved (``real_roots``; ``roots`` for messages)."""
    if not roots:
        raise ToolError(NO_WORKSPACE, "NO_WORKSPACE")
    if "\x00" in path:
        raise ToolError("the path contains a NUL character", "PATH_INVALID")
    raw = path.strip() or "."
    joined = raw if os.path.isabs(raw) else os.path.join(real_roots[0], raw)
    real = os.path.realpath(joined)
    if not _within(real, real_roots):
        raise ToolError(
            f"{path!r} is outside the workspace; allowed folders: {', '.join(roots)}", "PATH_OUTSIDE_WORKSPACE"
        )
    return Path(real)


def _within(real: str, real_roots: Sequence[str]) -> bool:
    """Whether the resolved ``real`` lies in one of the resolved ``real_roots`` (no file-system access)."""
    target = os.path.normcase(real)
    for root in real_roots:
        base = os.path.normcase(root)
        try:
            if os.path.commonpath([base, target]) == base:
                return True
        except ValueError:  # different drives (Windows)
            continue
    return False


def display_path(real: Path, real_roots: Sequence[str]) -> str:
    """How a path is shown to the model: relative to the first (resolved) root, which is what a relative
    argument means, else absolute."""
    base = real_roots[0] if real_roots else ""
    try:
        if base and os.path.commonpath([base, str(real)]) == base:
            rel = os.path.relpath(real, base)
            return "." if rel == "." else Path(rel).as_posix()
    except ValueError:
        pass
    return str(real)


@dataclass(frozen=True)
class _Where:
    """A resolved tool path: the real path, how the model sees it, and the resolved roots."""

    real: Path
    shown: str
    roots: list[str]


def _locate(path: str, roots: Sequence[str]) -> _Where:
    real_roots = _real_roots(roots)  # once per call
    real = _resolve(path, roots, real_roots)
    return _Where(real, display_path(real, real_roots), real_roots)


async def _in_thread(
    path: str, ctx: ToolContext, work: Callable[[_Where, threading.Event], _T], *, abandon: bool = True
) -> tuple[_Where, _T]:
    """Resolve ``path`` and run ``work`` on it in one worker thread; an ``OSError`` becomes a ``ToolError``.

    ``abandon``: on timeout/cancel, return at once and leave the thread behind (it sees the stop event set).
    """
    roots = list(ctx.workspace_roots)
    stop = threading.Event()

    def job() -> tuple[_Where, _T]:
        where = None
        try:
            where = _locate(path, roots)
            return where, work(where, stop)
        except OSError as exc:
            raise _os_error(exc, where.shown if where else path) from None

    try:
        return await anyio.to_thread.run_sync(job, abandon_on_cancel=abandon)
    finally:
        stop.set()


def _os_error(exc: OSError, shown: str) -> ToolError:
    code = _ERRNO_CODES.get(exc.errno or 0, "OS_ERROR")
    why = exc.strerror or str(exc) or type(exc).__name__
    return ToolError(f"{shown}: {why}", code)


_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_BY_DIR_FD = os.open in os.supports_dir_fd and hasattr(os, "O_NOFOLLOW") and hasattr(os, "O_DIRECTORY")
"""POSIX: descriptor-relative opens. Elsewhere (Windows: no dir_fd) the checked path is opened as it is."""


@dataclass
class _Beneath:
    """A checked path's folder, held open: ``dir_fd`` (None without descriptor-relative opens) and the name."""

    dir_fd: int | None
    name: str
    path: Path

    def close(self) -> None:
        if self.dir_fd is not None:
            os.close(self.dir_fd)
            self.dir_fd = None


def _beneath(real: Path | str, real_roots: Sequence[str], *, create_dirs: bool = False) -> _Beneath:
    """Open the folder of the resolved ``real`` from the root that holds it, one component at a time, never
    following a symlink (``create_dirs``: missing folders are made on the way). The caller closes it."""
    real = Path(real)
    if not _BY_DIR_FD:
        if create_dirs:
            real.parent.mkdir(parents=True, exist_ok=True)
        return _Beneath(None, real.name, real)
    root, parts = _under_root(real, real_roots)
    if not parts:
        raise ToolError(f"{real.name} is a directory", "IS_A_DIRECTORY")
    fd = _walk_down(os.open(root, _DIR_FLAGS), parts[:-1], real.name, create_dirs=create_dirs)
    return _Beneath(fd, parts[-1], real)


def _open_folder(real: Path, real_roots: Sequence[str]) -> int:
    """An fd of the resolved folder ``real`` itself, opened like :func:`_beneath` opens a file's folder (every
    component, the last one included, with ``O_NOFOLLOW | O_DIRECTORY``). POSIX only; the caller closes it."""
    root, parts = _under_root(real, real_roots)
    return _walk_down(os.open(root, _DIR_FLAGS), parts, real.name)


def _under_root(real: Path, real_roots: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """The resolved root holding ``real`` and the components of ``real`` below it (none for the root itself)."""
    root = next((r for r in real_roots if _within(str(real), [r])), None)
    if root is None:
        raise ToolError(f"{real.name} is outside the workspace", "PATH_OUTSIDE_WORKSPACE")
    parts = Path(os.path.relpath(real, root)).parts
    return root, () if parts == (".",) else parts


def _walk_down(fd: int, parts: Sequence[str], shown: str, *, create_dirs: bool = False) -> int:
    """From the folder fd ``fd`` (taken over: closed on the way), open ``parts`` one folder at a time with
    ``O_NOFOLLOW | O_DIRECTORY``; the fd of the last one. A component that is a symlink is refused
    (``PATH_OUTSIDE_WORKSPACE``: it was checked as a folder, so it was swapped since); ``create_dirs`` makes
    missing folders on the way. The caller closes the fd returned."""
    try:
        for part in parts:
            try:
                nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create_dirs:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
                nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(part, fd):  # swapped since the check
                    raise ToolError(
                        f"{shown}: a folder on its path changed while it was opened (a symlink appeared)",
                        "PATH_OUTSIDE_WORKSPACE",
                    ) from None
                raise
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _open_regular(
    real: Path | str, flags: int, *, append: bool = False, single_link: bool = False, dir_fd: int | None = None
) -> int:
    """An fd for the regular file ``real`` (a name in ``dir_fd`` when given), opened without blocking and
    without following a final symlink.

    Anything but a regular file is refused (``NOT_A_FILE``; a directory: ``IS_A_DIRECTORY``), and with
    ``append`` or ``single_link`` a file with several hard links too (``HARD_LINKED``). The caller owns (closes)
    the fd.
    """
    name = os.path.basename(real)
    try:
        fd = os.open(real, flags | _OPEN_FLAGS, 0o666, dir_fd=dir_fd)
    except FileNotFoundError:
        raise ToolError(f"no such file: {name}", "NOT_FOUND") from None
    except IsADirectoryError:
        raise ToolError(f"{name} is a directory", "IS_A_DIRECTORY") from None
    except OSError as exc:
        if exc.errno in (errno.ENXIO, errno.EOPNOTSUPP):  # a FIFO without reader, a socket
            raise ToolError(f"{name} is not a regular file", "NOT_A_FILE") from None
        raise
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise ToolError(f"{name} is a directory", "IS_A_DIRECTORY")
        if not stat.S_ISREG(st.st_mode):
            raise ToolError(f"{name} is not a regular file", "NOT_A_FILE")
        if append and st.st_nlink > 1:
            raise ToolError(
                f"{name} has {st.st_nlink} hard links; appending would also change the other names "
                "(use mode 'overwrite' to replace it)",
                "HARD_LINKED",
            )
        if single_link and st.st_nlink > 1:
            raise ToolError(
                f"{name} has {st.st_nlink} hard links; another name may lie outside the workspace", "HARD_LINKED"
            )
    except BaseException:
        os.close(fd)
        raise
    return fd


class _FileTool(Tool):
    def unavailable_reason(self, ctx: ToolContext) -> str | None:
        return None if ctx.workspace_roots else NO_WORKSPACE


def _skip_dir(name: str) -> bool:
    return name.startswith(".") or name in SKIPPED_DIRS


# --- read_file -------------------------------------------------------------------------------------------------


class ReadFileParams(ToolParams):
    """``max_lines`` comes before ``start_line``: the arguments are written in this order, and the local model,
    offered ``start_line`` first, wrote "the first 10 lines" as ``start_line: 10`` (5 of 5 requests in both
    languages, 2026-12-04; 4 of 5 right after the swap, "from line 30" still ``start_line: 30``)."""

    path: str = Field(min_length=1, max_length=4096, description="Relative to the workspace, or absolute.")
    max_lines: int = Field(
        2000, ge=1, le=2000, description="How many lines to return from start_line: the first 10 lines are 10."
    )
    start_line: int = Field(1, ge=1, description="The line to start at, 1-based: 1 is the top of the file.")


class ReadFile(_FileTool):
    name = "read_file"
    description = (
        "Read a UTF-8 text file in the workspace: up to max_lines lines from start_line, and the total line "
        "count. Binary files are refused; at most 2 MiB is read."
    )
    Params = ReadFileParams
    category = MetonaToolCategory.FILESYSTEM
    risk_level = MetonaRiskLevel.LOW
    timeout_ms = 15_000

    async def run(self, args: ReadFileParams, ctx: ToolContext) -> ToolOutput:
        try:
            where, (data, size_truncated) = await _in_thread(args.path, ctx, lambda w, _stop: _read_head(w))
            meant = ""
        except ToolError as exc:
            if exc.code != "NOT_FOUND":
                raise
            path = await _the_one_meant(args.path.strip(), ctx, exc)
            where, (data, size_truncated) = await _in_thread(path, ctx, lambda w, _stop: _read_head(w))
            meant = f" (there is no {args.path.strip()}: the one file it can mean)"
        text = _decode_text(data, args.path)
        lines = _split_lines(text)
        total = len(lines)
        if total and args.start_line > total:
            raise ToolError(
                f"start_line {args.start_line} is past the end of the file ({total} lines)", "INVALID_RANGE"
            )
        start = args.start_line if total else 0
        chosen = lines[max(start - 1, 0) : max(start - 1, 0) + args.max_lines]
        end = start + len(chosen) - 1 if chosen else start
        shown = where.shown
        result = {
            "path": shown,
            "start_line": start,
            "end_line": end,
            "total_lines": total,
            "content": "\n".join(chosen),
            "truncated": size_truncated or end < total,
        }
        header = f"File {shown}{meant}: lines {start}-{end} of {total}"
        if size_truncated:
            header += " (file larger than 2 MiB: only its first 2 MiB were read)"
        elif end < total:
            header += f" (more lines follow: read on with start_line={end + 1})"
        return ToolOutput(result=result, summary=f"{header}\n{result['content']}")


NEAR_NAMES = 5
"""Most near names a read's ``NOT_FOUND`` lists (:func:`_near_names`)."""


async def _the_one_meant(asked: str, ctx: ToolContext, missing: ToolError) -> str:
    """The one file a read of ``asked``, which is not there, can mean (:func:`_near_names`): in its folder, or in
    the one folder a missing folder can mean, else in the folders below; ``missing`` (with the names it can mean,
    when several) when there is not exactly one."""
    folder, name = os.path.split(asked)
    try:
        _, near = await _in_thread(folder or ".", ctx, lambda w, stop: _near_names(w, name, stop=stop))
    except ToolError:  # no such folder either (or not a folder): the one folder it can mean, if any
        parent, last = os.path.split(folder)
        try:
            _, folders = await _in_thread(parent or ".", ctx, lambda w, stop: _near_names(w, last, True, stop=stop))
            if len(folders) == 1:
                folder = os.path.join(parent, folders[0])
                _, near = await _in_thread(folder, ctx, lambda w, stop: _near_names(w, name, stop=stop))
        except ToolError:
            folders = []
        if len(folders) != 1:
            raise missing from None
    if not near:  # none beside it: the files below that it can mean ("notes v2.md" in "Project Docs")
        _, near = await _in_thread(folder or ".", ctx, lambda w, stop: _near_names(w, name, below=True, stop=stop))
    if len(near) != 1:
        hint = f" (did you mean {' or '.join(repr(n) for n in near)}?)" if near else ""
        raise ToolError(missing.message + hint, missing.code) from None
    return os.path.join(folder, near[0]) if folder else near[0]


NEAR_WALK = 2000
"""Most entries the search below a folder for a read's near names looks at (:func:`_near_names` ``below``)."""


def _near_names(
    where: _Where, name: str, folders: bool = False, *, below: bool = False, stop: threading.Event | None = None
) -> list[str]:
    """The regular files (``folders``: the folders) in the folder ``where`` that a read of ``name`` there most
    likely meant, when there is no ``name`` (:func:`_can_mean`); ``below``: those in its subfolders instead, as
    paths relative to it, at most :data:`NEAR_WALK` entries looked at (a name the request cut at a space inside its
    folder's path: "Check Project Docs/notes v2.md" read as ``v2.md``). Hidden entries, and entries in hidden
    folders, are not offered; at most :data:`NEAR_NAMES`, sorted. The folder is listed as list_directory lists it
    (:func:`_open_listed`, :func:`_walk_entries`: never through a folder swapped for a symlink); one that is missing
    or a file is a ``ToolError``. Stops when ``stop`` is set."""
    if not name or name in (".", ".."):
        return []
    found = []
    with contextlib.closing(_walk_entries(_open_listed(where.real, where.roots), below)) as walk:
        for seen, (rel, entry) in enumerate(walk):
            if (below and seen >= NEAR_WALK) or (stop is not None and stop.is_set()):
                break
            if below and "/" not in rel:
                continue  # beside it: looked at first
            kind = entry.is_dir(follow_symlinks=False) if folders else entry.is_file(follow_symlinks=False)
            hidden = any(part.startswith(".") for part in rel.split("/"))
            if kind and not hidden and _can_mean(name, entry.name, folders):
                found.append(rel)
    return sorted(found)[:NEAR_NAMES]


def _can_mean(name: str, other: str, folder: bool = False) -> bool:
    """``other`` is what a request's ``name`` most likely meant: the same name in other letter case (``readme.md``:
    ``README.md``), a file's ``name`` and an extension (``README``: ``README.md``) or ``name`` without the extension
    it was given (``NOTES.txt``: ``NOTES``), a name that ends in a space and ``name`` (``Notes.md``: ``My Notes.md``
    — an unquoted name with spaces is easily cut at its first word: "the file called My Notes.md", "打开 需求
    说明.txt"), or ``name`` ending in ``other`` after a space or a Chinese character
    (``读一下项目资料目录下的需求说明.txt``: ``需求说明.txt`` — Chinese words are glued to the name; at least two
    characters before any extension)."""
    name, other = name.casefold(), other.casefold()
    stem = os.path.splitext(other)[0]
    if other == name or (not folder and stem == name and "." not in name) or other.endswith(" " + name):
        return True
    if not folder and "." not in other and os.path.splitext(name)[0] == other:
        return True  # an extension the file has not: NOTES.txt for NOTES
    before = name[: len(name) - len(other)]
    return name.endswith(other) and len(stem) >= 2 and bool(before) and (before[-1] == " " or _is_cjk(before[-1]))


def _is_cjk(char: str) -> bool:
    return "\u3400" <= char <= "\u9fff" or "\uf900" <= char <= "\ufaff"


def _read_head(where: _Where) -> tuple[bytes, bool]:
    real = where.real
    if real.is_dir():
        raise ToolError(f"{real.name} is a directory (use list_directory)", "IS_A_DIRECTORY")
    data = _read_regular(real, where.roots, MAX_READ_BYTES + 1)
    if len(data) <= MAX_READ_BYTES:
        return data, False
    data = data[:MAX_READ_BYTES]
    cut = data.rfind(b"\n")  # never end inside a multi-byte character
    return (data[: cut + 1] if cut >= 0 else data), True


def _read_regular(real: Path | str, real_roots: Sequence[str], limit: int) -> bytes:
    """Up to ``limit`` bytes of the regular, singly-linked file ``real``, opened beneath its root."""
    folder = _beneath(real, real_roots)
    try:
        fd = _open_regular(folder.name if folder.dir_fd is not None else real, os.O_RDONLY, single_link=True,
                           dir_fd=folder.dir_fd)  # fmt: skip
    finally:
        folder.close()
    with os.fdopen(fd, "rb") as fh:
        return fh.read(limit)


def _decode_text(data: bytes, path: str) -> str:
    if b"\x00" in data:
        raise ToolError(f"{path} is a binary file, not text", "BINARY_FILE")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ToolError(f"{path} is not UTF-8 text (binary or another encoding)", "BINARY_FILE") from None


def _split_lines(text: str) -> list[str]:
    """Lines as an editor numbers them: split at ``\\n`` only, ``\\r\\n`` endings stripped."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


# --- write_file ------------------------------------------------------------------------------------------------


class WriteFileParams(ToolParams):
    path: str = Field(min_length=1, max_length=4096, description="Relative to the workspace, or absolute.")
    content: str = Field(max_length=MAX_WRITE_BYTES, description="The text to write.")
    mode: Literal["overwrite", "append", "create"] = Field(
        "create",
        description="create, overwrite or append.",
    )


class WriteFile(_FileTool):
    name = "write_file"
    description = (
        "Write a UTF-8 text file in the workspace (missing folders are created). mode: create (fails if the "
        "file exists), overwrite (replaces it) or append. Needs the user's permission."
    )
    Params = WriteFileParams
    category = MetonaToolCategory.FILESYSTEM
    risk_level = MetonaRiskLevel.HIGH
    requires_permission = True
    permission = "filesystem.write"
    timeout_ms = 30_000

    async def run(self, args: WriteFileParams, ctx: ToolContext) -> ToolOutput:
        data = args.content.encode("utf-8")
        if len(data) > MAX_WRITE_BYTES:
            raise ToolError(f"content is {len(data)} bytes; the limit is {MAX_WRITE_BYTES}", "CONTENT_TOO_LARGE")
        where, created = await _in_thread(
            args.path, ctx, lambda w, _stop: _write(w.real, w.roots, data, args.mode), abandon=False
        )
        shown = where.shown
        action = "appended to" if args.mode == "append" else "created" if created else "overwrote"
        result = {"path": shown, "mode": args.mode, "bytes_written": len(data), "created": created}
        return ToolOutput(result=result, summary=f"{action} {shown} ({len(data)} bytes written)")


def _write(real: Path, real_roots: Sequence[str], data: bytes, mode: str) -> bool:
    """Write ``data`` (every call relative to the folder's descriptor); True when the file did not exist before."""
    folder = _beneath(real, real_roots, create_dirs=True)
    try:
        return _write_in(folder, data, mode)
    finally:
        folder.close()


def _write_in(folder: _Beneath, data: bytes, mode: str) -> bool:
    d, name = folder.dir_fd, folder.name
    target = name if d is not None else folder.path
    try:
        st: os.stat_result | None = os.stat(target, dir_fd=d, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{name} is a directory", "IS_A_DIRECTORY")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise ToolError(f"{name} is not a regular file", "NOT_A_FILE")
    existed = st is not None
    if mode == "create" and existed:
        raise ToolError(f"{name} already exists (use mode 'overwrite' or 'append')", "FILE_EXISTS")
    if mode == "append":
        fd = _open_regular(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, append=True, dir_fd=d)
        with os.fdopen(fd, "ab") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        return not existed
    _atomic_write(folder, data, st, no_clobber=mode == "create")
    return not existed


def _atomic_write(folder: _Beneath, data: bytes, st: os.stat_result | None, *, no_clobber: bool) -> None:
    """Temp file in the same folder, fsync, then rename over (or hard-link for ``no_clobber``)."""
    d = folder.dir_fd
    tmp_name = f".{uuid.uuid4().hex[:16]}.tmp"  # short: a 255-byte file name still works
    tmp = tmp_name if d is not None else str(folder.path.with_name(tmp_name))
    target = folder.name if d is not None else str(folder.path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(tmp, flags, 0o666, dir_fd=d)
    try:
        with os.fdopen(fd, "wb") as fh:
            if st is not None:
                os.fchmod(fh.fileno(), stat.S_IMODE(st.st_mode)) if hasattr(os, "fchmod") else None
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if no_clobber:
            _link_no_clobber(tmp, target, d)
        else:
            os.replace(tmp, target, src_dir_fd=d, dst_dir_fd=d)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=d)
    _fsync_dir(d)


def _link_no_clobber(tmp: str, target: str, d: int | None) -> None:
    name = os.path.basename(target)
    try:
        os.link(tmp, target, src_dir_fd=d, dst_dir_fd=d, follow_symlinks=False)  # fails if it appeared meanwhile
    except FileExistsError:
        raise ToolError(f"{name} already exists (use mode 'overwrite' or 'append')", "FILE_EXISTS") from None
    except OSError:  # no hard links on this file system
        try:
            os.stat(target, dir_fd=d, follow_symlinks=False)
        except FileNotFoundError:
            os.replace(tmp, target, src_dir_fd=d, dst_dir_fd=d)
            return
        raise ToolError(f"{name} already exists", "FILE_EXISTS") from None


def _fsync_dir(dir_fd: int | None) -> None:
    if os.name != "posix" or dir_fd is None:
        return
    with contextlib.suppress(OSError):
        os.fsync(dir_fd)


# --- list_directory --------------------------------------------------------------------------------------------


class ListDirectoryParams(ToolParams):
    path: str = Field(".", min_length=1, max_length=4096, description="Relative to the workspace, or absolute.")
    recursive: bool = Field(False, description="Include subfolders (hidden ones skipped).")
    max_entries: int = Field(500, ge=1, le=5000, description="Most entries.")


class ListDirectory(_FileTool):
    name = "list_directory"
    description = "List a workspace folder: files with sizes, folders ending in '/'."
    Params = ListDirectoryParams
    category = MetonaToolCategory.FILESYSTEM
    risk_level = MetonaRiskLevel.SAFE
    timeout_ms = 15_000

    async def run(self, args: ListDirectoryParams, ctx: ToolContext) -> ToolOutput:
        where, (entries, truncated) = await _in_thread(
            args.path, ctx, lambda w, stop: _list(w.real, w.roots, args.recursive, args.max_entries, stop)
        )
        shown = where.shown
        entries = [{**e, "path": _from_root(shown, e["path"])} for e in entries]
        lines = [_entry_line(e) for e in entries]
        header = f"{shown}: {len(entries)} entries" + (
            f" (stopped at max_entries={args.max_entries})" if truncated else ""
        )
        result = {"path": shown, "entries": entries, "truncated": truncated}
        return ToolOutput(result=result, summary="\n".join([header, *lines]))


def _from_root(folder: str, path: str) -> str:
    """A path found in ``folder`` (as shown: :func:`display_path`) as a path from the workspace, what read_file takes:
    "英语.md" found in "笔记" is "笔记/英语.md" (the local model read "英语.md" after a search in 笔记, and failed)."""
    return path if folder in (".", "") else f"{folder.rstrip('/')}/{path}"


def _entry_line(entry: dict[str, Any]) -> str:
    if entry["type"] == "dir":
        return entry["path"] + "/"
    if entry["type"] == "file":
        return f"{entry['path']}  ({entry['size']} bytes)"
    return f"{entry['path']}  ({entry['type']})"


def _list(
    real: Path, real_roots: Sequence[str], recursive: bool, limit: int, stop: threading.Event
) -> tuple[list[dict[str, Any]], bool]:
    """The entries of the resolved folder ``real``, listed through its descriptor (:func:`_open_folder`) and its
    subfolders' (opened from it the same way), so a folder swapped for a symlink is never listed through."""
    entries: list[dict[str, Any]] = []
    with contextlib.closing(_walk_entries(_open_listed(real, real_roots), recursive)) as walk:
        for rel, entry in walk:
            if stop.is_set():
                break
            if len(entries) >= limit:
                return entries, True
            entries.append(_describe(rel, entry))  # while its folder's fd is open (DirEntry stats through it)
    return entries, False


def _open_listed(real: Path, real_roots: Sequence[str]) -> int | Path:
    """The folder to list: its fd (POSIX), else the checked path; typed errors for a missing folder or a file."""
    try:
        if not _BY_DIR_FD:
            if not real.is_dir():
                os.stat(real)  # FileNotFoundError when missing
                raise NotADirectoryError(errno.ENOTDIR, "not a directory")
            return real
        return _open_folder(real, real_roots)
    except FileNotFoundError:
        raise ToolError(f"no such folder: {real.name}", "NOT_FOUND") from None
    except NotADirectoryError:
        raise ToolError(f"{real.name} is not a folder (use read_file)", "NOT_A_DIRECTORY") from None


def _walk_entries(base: int | Path, recursive: bool) -> Generator[tuple[str, os.DirEntry[str]], None, None]:
    """(path relative to ``base``, entry) breadth first, sorted by name per folder. ``base`` is a folder fd
    (taken over: closed when the walk ends) whose subfolders are opened from it by :func:`_walk_down`, or a
    path (no descriptor-relative opens). A subfolder that cannot be opened (gone, or swapped for a symlink) is
    skipped."""
    pending: list[tuple[str, ...]] = [()]
    try:
        while pending:
            parts = pending.pop(0)
            try:
                folder: int | Path = (
                    base.joinpath(*parts) if isinstance(base, Path) else _walk_down(os.dup(base), parts, "")
                )
            except (OSError, ToolError):
                continue
            try:
                with os.scandir(folder) as it:
                    items = sorted(it, key=lambda e: e.name.lower())
            except OSError:
                items = []
            try:
                for entry in items:
                    yield "/".join((*parts, entry.name)), entry
                    if recursive and entry.is_dir(follow_symlinks=False) and not _skip_dir(entry.name):
                        pending.append((*parts, entry.name))
            finally:
                if isinstance(folder, int):
                    os.close(folder)
    finally:
        if isinstance(base, int):
            os.close(base)


def _describe(rel: str, entry: os.DirEntry[str]) -> dict[str, Any]:
    if entry.is_symlink():
        return {"path": rel, "type": "symlink"}
    if entry.is_dir():
        return {"path": rel, "type": "dir"}
    if entry.is_file():
        try:
            size = entry.stat().st_size
        except OSError:
            size = None
        return {"path": rel, "type": "file", "size": size}
    return {"path": rel, "type": "other"}


# --- search_files ----------------------------------------------------------------------------------------------


class SearchFilesParams(ToolParams):
    query: str = Field(min_length=1, max_length=500, description="Text to find.")
    path: str = Field(".", min_length=1, max_length=4096, description="Folder to search.")
    glob: str = Field("*", min_length=1, max_length=200, description="File name pattern, e.g. '*.md'.")
    max_results: int = Field(50, ge=1, le=500, description="Most matches.")
    case_sensitive: bool = Field(False, description="Match case exactly.")


class SearchFiles(_FileTool):
    name = "search_files"
    description = (
        "Find which files in a workspace folder mention a text (plain, not a regex), in their names or lines; "
        "answers path:line: text. When no line holds the text whole, the files that hold all of its words are "
        "given (for Chinese text, its longest part any file holds). Binary files, files over 2 MiB and hidden "
        "folders are skipped."
    )
    Params = SearchFilesParams
    category = MetonaToolCategory.SEARCH
    risk_level = MetonaRiskLevel.LOW
    timeout_ms = 30_000

    async def run(self, args: SearchFilesParams, ctx: ToolContext) -> ToolOutput:
        where, (matches, truncated, scanned) = await _in_thread(
            args.path, ctx, lambda w, stop: _search(w.real, args, w.roots, stop)
        )
        words = _query_words(args.query)
        by_words = False
        if not matches and len(words) > 1:
            where, (matches, truncated, scanned) = await _in_thread(
                args.path, ctx, lambda w, stop: _search(w.real, args, w.roots, stop, _all_words(args, words))
            )
            by_words = bool(matches)
        part = None
        for parts in _cjk_parts(args.query) if not matches else ():
            where, (matches, truncated, scanned) = await _in_thread(args.path, ctx, _searching(args, _any_part(parts)))
            if matches:
                part = next((p for p in parts if any(p in (m.get("text") or m["path"]) for m in matches)), parts[0])
                break
        shown = where.shown
        matches = [{**m, "path": _from_root(shown, m["path"])} for m in matches]
        result = {
            "query": args.query,
            "path": shown,
            "matches": matches,
            "truncated": truncated,
            "files_scanned": scanned,
            **({"matched": "all words"} if by_words else {}),
            **({"matched": "part", "part": part} if part else {}),
        }
        summary = _search_summary(args, shown, matches, truncated, scanned, by_words, part)
        return ToolOutput(result=result, summary=summary)


SUMMARY_FILES = 10
"""Most files a search's summary names in its first line (every match follows, one a line): told only the matches,
the local model's answer to "which files mention …?" named the first file of two (agent-mine-v4, a tuning set,
2026-12-05)."""


def _search_summary(
    args: SearchFilesParams,
    shown: str,
    matches: list[dict[str, Any]],
    truncated: bool,
    n: int,
    by_words: bool = False,
    part: str | None = None,
) -> str:
    if not matches:
        return f"No matches for {args.query!r} in {shown} ({n} files scanned)."
    what = f"the words of {args.query!r} (no line holds it whole)" if by_words else repr(args.query)
    if part:
        what = f"{part!r}, the longest part of {args.query!r} any file holds"
    files = list(dict.fromkeys(m["path"] for m in matches))
    named = ", ".join(files[:SUMMARY_FILES]) + (
        f", and {len(files) - SUMMARY_FILES} more" if len(files) > SUMMARY_FILES else ""
    )
    head = (
        f"{len(matches)} matches for {what} in {shown}"
        + (f" (stopped at max_results={args.max_results})" if truncated else "")
        + f"; {len(files)} file{'s' if len(files) > 1 else ''}: {named}"
    )
    lines = [
        f"{m['path']}: (file name)" if m["kind"] == "name" else f"{m['path']}:{m['line']}: {m['text']}" for m in matches
    ]
    return "\n".join([head, *lines])


Finder = Callable[[str, str, str, list[str]], Iterator[dict[str, Any]]]
"""The matches of one file: (path to open, path shown, name, the workspace's real roots) → its matches."""


def _search(
    base: Path, args: SearchFilesParams, roots: list[str], stop: threading.Event, find: Finder | None = None
) -> tuple[list[dict[str, Any]], bool, int]:
    """The matches of ``find`` (default: the query whole, :func:`_exact`) in the files under ``base``, at most
    ``max_results``; whether more were left; how many files were scanned."""
    if not base.exists():
        raise ToolError(f"no such folder: {base.name}", "NOT_FOUND")
    if not base.is_dir():
        raise ToolError(f"{base.name} is not a folder", "NOT_A_DIRECTORY")
    find = find or _exact(args)
    matches: list[dict[str, Any]] = []
    scanned = 0
    for full, rel, name in _walk_files(base, args.glob, roots, stop):
        if stop.is_set():
            break
        scanned += 1
        for match in find(full, rel, name, roots):
            if len(matches) >= args.max_results:
                return matches, True, scanned
            matches.append(match)
    return matches, False, scanned


def _exact(args: SearchFilesParams) -> Finder:
    """A file's matches of the query whole: its name, then each line that holds it (read as they are needed). A
    query with ``*`` or ``?`` also matches the names it fits as a pattern ("*.csv", "report-202?.md": what "find
    all the .csv files" is asked as)."""
    needle = args.query if args.case_sensitive else args.query.lower()
    pattern = needle.strip() if any(c in needle for c in "*?") else None

    def find(full: str, rel: str, name: str, roots: list[str]) -> Iterator[dict[str, Any]]:
        named = name if args.case_sensitive else name.lower()
        if needle in named or (pattern is not None and fnmatch.fnmatchcase(named, pattern)):
            yield {"path": rel, "kind": "name"}
        for line_no, line in _text_lines(full, roots):
            hay = line if args.case_sensitive else line.lower()
            at = hay.find(needle)
            if at >= 0:
                yield {"path": rel, "kind": "content", "line": line_no, "text": _excerpt(line, at)}

    return find


def _query_words(query: str) -> list[str]:
    """The words of a query for the all-words search: split on spaces and punctuation, each once, those of one
    character left out ("API rate limit" → API, rate, limit)."""
    words = re.findall(r"[^\W_]+(?:[-'][^\W_]+)*", query)
    return list(dict.fromkeys(w for w in words if len(w) > 1))


_CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]{3,}")
CJK_PART_RUN = 12
"""Most characters of a Chinese run whose parts :func:`_cjk_parts` gives (one search per part length)."""


def _cjk_parts(query: str) -> list[list[str]]:
    """When neither the query whole nor all its words are found: the parts of its longest run of Chinese characters
    (written without spaces, so one "word"), grouped by length, longest first, down to two characters — the
    search keeps the first length any file holds. "小区门禁密码" finds a file of "门禁密码：#2580" (a request's extra
    words, the model's query: agent-mine-v5, a tuning set, 2026-12-05). Empty for a query without such a run."""
    runs = _CJK_RUN.findall(query)
    if not runs:
        return []
    run = max(runs, key=len)[:CJK_PART_RUN]
    return [
        list(dict.fromkeys(run[i : i + size] for i in range(len(run) - size + 1)))
        for size in range(len(run) - 1, 1, -1)
    ]


def _searching(
    args: SearchFilesParams, find: Finder
) -> Callable[[_Where, threading.Event], tuple[list[dict[str, Any]], bool, int]]:
    """The work of one search of ``find`` in the resolved folder (:func:`_search`), for :func:`_in_thread`."""
    return lambda where, stop: _search(where.real, args, where.roots, stop, find)


def _any_part(parts: list[str]) -> Finder:
    """A file's matches of any of ``parts`` (Chinese, so no case): its name, then each line that holds one."""

    def find(full: str, rel: str, name: str, roots: list[str]) -> Iterator[dict[str, Any]]:
        if any(p in name for p in parts):
            yield {"path": rel, "kind": "name"}
        for line_no, line in _text_lines(full, roots):
            at = min((i for p in parts if (i := line.find(p)) >= 0), default=-1)
            if at >= 0:
                yield {"path": rel, "kind": "content", "line": line_no, "text": _excerpt(line, at)}

    return find


def _all_words(args: SearchFilesParams, words: list[str]) -> Finder:
    """A file's matches when its name and lines hold every one of ``words`` (anywhere, in any order: "API rate
    limit" finds "Rate limits: 100 requests a minute per API key"): its lines that hold any of them (those holding
    the most, at most :data:`WORD_LINES`, in order), or its name when no line holds one."""
    wanted = words if args.case_sensitive else [w.lower() for w in words]

    def find(full: str, rel: str, name: str, roots: list[str]) -> Iterator[dict[str, Any]]:
        seen = {w for w in wanted if w in (name if args.case_sensitive else name.lower())}
        lines: list[tuple[int, int, str, int]] = []
        for line_no, line in _text_lines(full, roots):
            hay = line if args.case_sensitive else line.lower()
            held = [w for w in wanted if w in hay]
            if held:
                seen.update(held)
                lines.append((-len(held), line_no, line, hay.find(held[0])))
        if len(seen) < len(wanted):
            return
        if not lines:
            yield {"path": rel, "kind": "name"}
        for _, line_no, line, at in sorted(sorted(lines)[:WORD_LINES], key=lambda x: x[1]):
            yield {"path": rel, "kind": "content", "line": line_no, "text": _excerpt(line, at)}

    return find


def _walk_files(
    base: Path, pattern: str, real_roots: list[str], stop: threading.Event
) -> Iterator[tuple[str, str, str]]:
    """(path to open, path shown, name) of each file matching ``pattern``; a symlink is given as its target, and
    skipped when that lies outside the workspace. Stops walking as soon as ``stop`` is set."""
    for folder, dirs, files in os.walk(base):
        if stop.is_set():
            return
        dirs[:] = sorted(d for d in dirs if not _skip_dir(d))
        for name in sorted(files):
            if not fnmatch.fnmatch(name, pattern):
                continue
            full = os.path.join(folder, name)
            if os.path.islink(full):
                full = os.path.realpath(full)
                if not _within(full, real_roots):
                    continue  # a link out of the workspace: never read through it
            yield full, Path(os.path.relpath(os.path.join(folder, name), base)).as_posix(), name


def _text_lines(full: str, real_roots: Sequence[str]) -> Iterator[tuple[int, str]]:
    """The lines of the regular, singly-linked UTF-8 text file ``full`` (opened beneath its root); nothing for
    anything else (FIFOs, devices, binary, too large, unreadable, hard-linked)."""
    try:
        st = os.stat(full)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_SEARCH_FILE_BYTES:
            return
        data = _read_regular(full, real_roots, MAX_SEARCH_FILE_BYTES + 1)
    except (OSError, ToolError):
        return
    if b"\x00" in data:
        return
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return
    yield from enumerate(_split_lines(text), start=1)


WORD_LINES = 3
"""Most lines of one file an all-words search gives (:func:`_all_words`)."""


def _excerpt(line: str, at: int) -> str:
    if len(line) <= EXCERPT_CHARS:
        return line.strip()
    start = max(0, at - EXCERPT_CHARS // 4)
    piece = line[start : start + EXCERPT_CHARS]
    return ("…" if start else "") + piece + ("…" if start + EXCERPT_CHARS < len(line) else "")
