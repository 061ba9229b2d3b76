"""Issue 33 §2: no secret reaches a child or a shell.

* Every place in ``sidecar/`` that starts a process is listed here with how its environment is scrubbed; a new
  spawn site (a new worker kind, a helper tool) fails :func:`test_every_spawn_site_is_listed` until it is listed,
  and a listed ``env=`` site must pass ``env=`` (never the inherited environment).
* The supervisor's own default is the scrubbed environment (a new worker gets it for free) and the login-shell PATH
  probe runs the user's profile scripts without the master key or any provider key.
"""

from __future__ import annotations

import ast
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from sidecar.mcp_host import transport
from sidecar.workers.supervisor import ChildSupervisor

ROOT = Path(__file__).resolve().parents[2] / "sidecar"
CANARY = "canary-Hq3n8Vx2Lm7p"

ENV_KW = "passes env= (scrubbed_environ / worker_env / a fixed minimal set)"
SUPERVISED = "ChildSupervisor.spawn: scrubbed by default, secrets only through its named secrets= argument"

SITES: dict[str, str] = {
    "workers/supervisor.py::OrphanGuard._start::subprocess.Popen": ENV_KW,
    "workers/supervisor.py::ChildSupervisor.spawn::anyio.open_process": ENV_KW,
    "workers/channel.py::WorkerChannel._spawn::self._children.spawn": SUPERVISED,
    "system/devtools.py::dev_methods.spawn::children.spawn": SUPERVISED,
    "mcp_host/transport.py::login_shell_path::subprocess.run": ENV_KW,
    "cli/demo_media.py::make_meeting::subprocess.run": ENV_KW,
    "documents/ocr.py::installed_languages::subprocess.run": ENV_KW,  # tesseract, in the document worker
    "documents/ocr.py::read_image::subprocess.run": ENV_KW,
    "documents/ocr.py::detect_languages::subprocess.run": ENV_KW,
    "render/browser.py::BrowserPool._launch::pw.chromium.launch_persistent_context": ENV_KW,
    # the MCP SDK spawns the server with StdioServerParameters.env: get_default_environment() (HOME, PATH, USER,
    # SHELL, TERM, LOGNAME) + the manifest's env + the plugin's own settings and secrets, nothing of ours
    "mcp_host/host.py::McpHost._once::stdio_client": "StdioServerParameters(env=...) built from the SDK's safe set",
    # the demo client starts the sidecar itself (the holder of the secrets); it drops the key variable anyway
    "cli/wire_client.py::WireClient.__init__::subprocess.Popen": ENV_KW,
}
"""Every spawn site: ``path::enclosing function::callee`` → how its environment is kept free of secrets."""

_PROCESS_FUNCS = {
    "subprocess": {"run", "Popen", "call", "check_call", "check_output", "getoutput", "getstatusoutput"},
    "anyio": {"open_process", "run_process"},
    "asyncio": {"create_subprocess_exec", "create_subprocess_shell"},
    "os": {"system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp"},
    "pty": {"spawn", "fork"},
    "multiprocessing": {"Process", "Pool", "get_context"},
}
_ANY_RECEIVER = {"spawn", "stdio_client", "launch", "launch_persistent_context", "launch_server", "ProcessPoolExecutor"}
_MODULES = set(_PROCESS_FUNCS)


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


def _is_spawn(callee: str, imported: dict[str, str]) -> bool:
    head, _, last = callee.rpartition(".")
    if not head and last in imported:  # from subprocess import run
        head, last = imported[last].rsplit(".", 1)
    module = head.split(".")[-1] if head else ""
    if module == "os" and (last.startswith(("exec", "spawn"))):
        return True
    if last in _PROCESS_FUNCS.get(module, set()):
        return True
    return last in _ANY_RECEIVER and not callee.startswith("super()")


class _Finder(ast.NodeVisitor):
    def __init__(self, rel: str) -> None:
        self.rel = rel
        self.scope: list[str] = []
        self.imported: dict[str, str] = {}
        self.sites: dict[str, ast.Call] = {}

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and node.module.split(".")[0] in _MODULES:
            for alias in node.names:
                self.imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def visit_Call(self, node: ast.Call) -> None:
        callee = _dotted(node.func)
        if _is_spawn(callee, self.imported):
            self.sites[f"{self.rel}::{'.'.join(self.scope)}::{callee}"] = node
        self.generic_visit(node)


def _spawn_sites() -> Iterator[tuple[str, ast.Call]]:
    for path in sorted(ROOT.rglob("*.py")):
        finder = _Finder(path.relative_to(ROOT).as_posix())
        finder.visit(ast.parse(path.read_text(encoding="utf-8")))
        yield from finder.sites.items()


def test_every_spawn_site_is_listed() -> None:
    found = dict(_spawn_sites())
    new = sorted(set(found) - set(SITES))
    assert not new, f"new spawn site(s): give them a scrubbed environment and list them in SITES: {new}"
    gone = sorted(set(SITES) - set(found))
    assert not gone, f"listed spawn site(s) no longer found (update SITES): {gone}"
    for site, how in SITES.items():
        if how == ENV_KW:
            assert any(k.arg == "env" for k in found[site].keywords), f"{site} inherits the sidecar's environment"


def test_the_scan_sees_a_new_site(tmp_path: Path) -> None:
    """The scanner itself: a new worker kind that calls subprocess (under any import form) is found."""
    source = "from subprocess import Popen\nimport asyncio\nasync def go():\n    Popen(['x'])\n" \
             "    await asyncio.create_subprocess_exec('x')\n    await self.children.spawn(['x'])\n"  # fmt: skip
    finder = _Finder("documents/worker.py")
    finder.visit(ast.parse(source))
    assert sorted(finder.sites) == [
        "documents/worker.py::go::Popen",
        "documents/worker.py::go::asyncio.create_subprocess_exec",
        "documents/worker.py::go::self.children.spawn",
    ]


def _canaries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METONA_SECRET_KEY", CANARY + "-master")
    monkeypatch.setenv("OPENAI_API_KEY", CANARY + "-openai")
    monkeypatch.setenv("DEEPSEEK_API_KEY", CANARY + "-deepseek")


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX login shell")
def test_the_login_shell_probe_gets_no_secret(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    dump = tmp_path / "env.txt"
    shell = tmp_path / "fake-shell"
    shell.write_text(f'#!/bin/sh\nenv > "{dump}"\nprintf "__METONA_PATH__/probe/bin__METONA_PATH__"\n')
    shell.chmod(shell.stat().st_mode | stat.S_IXUSR)
    _canaries(monkeypatch)
    monkeypatch.setenv("SHELL", str(shell))
    transport.login_shell_path.cache_clear()
    try:
        assert transport.login_shell_path() == "/probe/bin"
    finally:
        transport.login_shell_path.cache_clear()
    seen = dump.read_text()
    assert "PATH=" in seen and "HOME=" in seen
    assert CANARY not in seen and "METONA_SECRET_KEY" not in seen and "_API_KEY" not in seen


@pytest.mark.anyio
async def test_the_supervisor_scrubs_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    _canaries(monkeypatch)
    children = ChildSupervisor()

    async def environ_of(**kwargs: object) -> str:
        argv = ["env"] if sys.platform != "win32" else ["cmd", "/c", "set"]
        proc = await children.spawn(argv, name="env", stdout=subprocess.PIPE, **kwargs)  # type: ignore[arg-type]
        assert proc.stdout is not None
        chunks = [chunk async for chunk in proc.stdout]
        await proc.wait()
        children.forget(proc.pid)
        return b"".join(chunks).decode()

    try:
        with anyio.fail_after(20):
            default = await environ_of()
            explicit = await environ_of(env={**os.environ, "EXTRA": "1"})
            named = await environ_of(secrets={"PLUGIN_TOKEN": CANARY + "-named"})
    finally:
        await children.stop_all()
    assert "PATH=" in default and CANARY not in default
    assert "EXTRA=1" in explicit and CANARY not in explicit  # a whole environ handed in is scrubbed too
    assert f"PLUGIN_TOKEN={CANARY}-named" in named and named.count(CANARY) == 1  # the named opt-in only
