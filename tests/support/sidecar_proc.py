"""Drive the real sidecar process over stdio (source install or the binary via ``SIDECAR_CMD``)."""

from __future__ import annotations

import itertools
import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def sidecar_cmd() -> list[str]:
    cmd = os.environ.get("SIDECAR_CMD")
    return shlex.split(cmd) if cmd else [sys.executable, "-m", "sidecar"]


class Sidecar:
    """One spawned sidecar. Every stdout line is checked to be one JSON value."""

    def __init__(
        self,
        data_dir: Path,
        *,
        dev: bool = True,
        env: dict[str, str] | None = None,
        args: list[str] | None = None,
        popen_kwargs: dict[str, Any] | None = None,
    ) -> None:
        full_env = dict(os.environ)
        full_env["METONA_DATA_DIR"] = str(data_dir)
        # the master key of secrets at rest: beside the data dir, never in the user's real config dir
        full_env.setdefault("METONA_SECRET_KEY_FILE", str(Path(data_dir).parent / (Path(data_dir).name + ".key")))
        if dev:
            full_env["METONA_DEV_METHODS"] = "1"
        full_env.update(env or {})
        self.stderr_path = data_dir.parent / f"stderr-{os.getpid()}-{id(self)}.log"
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            [*sidecar_cmd(), *(args or [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=full_env,
            cwd=ROOT,
            # its own process group, so a test can SIGKILL all of it (the sidecar and its workers)
            start_new_session=True,
            **(popen_kwargs or {}),
        )
        self.lines: queue.Queue[Any] = queue.Queue()
        self.raw_lines: list[bytes] = []
        self.bad_lines: list[bytes] = []
        self._ids = itertools.count(1000)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.raw_lines.append(raw)
            try:
                if not raw.endswith(b"\n"):
                    raise ValueError("line without newline")
                value = json.loads(raw.decode("utf-8"))
            except ValueError:
                self.bad_lines.append(raw)
                continue
            self.lines.put(value)
        self.lines.put(EOFError)

    # -- sending ----------------------------------------------------------------------------------
    def send_bytes(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: Any) -> None:
        self.send_bytes(json.dumps(message, ensure_ascii=False).encode() + b"\n")

    def request(self, method: str, params: Any = None, id: Any = None) -> Any:
        rid = next(self._ids) if id is None else id
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return rid

    def notify(self, method: str, params: Any = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    # -- receiving --------------------------------------------------------------------------------
    def next(self, timeout: float = 10.0) -> Any:
        value = self.lines.get(timeout=timeout)
        if value is EOFError:
            raise EOFError("sidecar closed stdout")
        return value

    def response(self, rid: Any, timeout: float = 10.0, collect: list[Any] | None = None) -> dict[str, Any]:
        """The response to ``rid``; other lines seen meanwhile go to ``collect`` (or are dropped)."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.next(max(0.01, deadline - time.monotonic()))
            if isinstance(value, dict) and value.get("id") == rid and ("result" in value or "error" in value):
                return value
            if collect is not None:
                collect.append(value)

    def call(self, method: str, params: Any = None, timeout: float = 10.0) -> dict[str, Any]:
        return self.response(self.request(method, params), timeout)

    def result(self, method: str, params: Any = None, timeout: float = 10.0) -> Any:
        reply = self.call(method, params, timeout)
        assert "result" in reply, reply
        return reply["result"]

    def initialize(self) -> dict[str, Any]:
        return self.result("initialize", {"client_info": {"name": "pytest"}})

    def assert_alive(self) -> None:
        """The process still answers (a ping round trip) and nothing else is pending."""
        pending: list[Any] = []
        reply = self.response(self.request("ping"), collect=pending)
        assert reply["result"] == {}, reply
        assert pending == [], pending

    def expect_silence_then_ping(self) -> None:
        """Nothing was answered to what was sent last (e.g. a notification)."""
        self.assert_alive()

    # -- ending -----------------------------------------------------------------------------------
    def kill_9(self) -> None:
        """SIGKILL the whole sidecar (its process group: the sidecar and its workers), as a crash would."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def wait(self, timeout: float = 10.0) -> int:
        return self.proc.wait(timeout=timeout)

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass

    def stderr_text(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.close_stdin()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self._reader.join(timeout=5)
        self._stderr.close()
        assert not self.bad_lines, f"non-JSON lines on stdout: {self.bad_lines[:3]!r}"


def worker_pids(sidecar_pid: int | None, module: str, entry: str) -> list[int]:
    """Live worker processes started as ``python -m <module>`` (source install), ``metona-engines <entry>`` (the
    binary's engines folder) or ``metona-sidecar <entry>`` (a light worker of the binary); with ``sidecar_pid``,
    only that sidecar's children."""
    procs: dict[int, tuple[list[bytes], str, int]] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
            state, ppid = (proc / "stat").read_text().rsplit(")", 1)[1].split()[:2]
        except OSError:
            continue
        procs[int(proc.name)] = (cmd, state, int(ppid))
    found = []
    for pid, (cmd, state, ppid) in procs.items():
        frozen = cmd[0].endswith((b"metona-engines", b"metona-sidecar"))
        is_worker = module.encode() in cmd or (cmd[1:2] == [entry.encode()] and frozen)
        if is_worker and state != "Z" and (sidecar_pid is None or ppid == sidecar_pid):
            found.append(pid)
    return found
