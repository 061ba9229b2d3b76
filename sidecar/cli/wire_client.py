"""A JSON-RPC client over a spawned sidecar's stdin/stdout, as the Electron app talks to it (used by ``demo``).

The sidecar's stdout is read on a thread: responses go to the waiting call, ``event`` notifications to their
subscription's queue, MetonaStreamEvent lines and other notifications are counted and dropped. Its stderr goes to a
file, never to our terminal.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

TERMINAL_EVENTS = frozenset({"Completed", "Failed", "Cancelled", "RunCompleted", "RunFailed", "RunCancelled"})


class WireError(Exception):
    """A typed failure: a JSON-RPC error answered by the sidecar, or one of the client's own (``code`` upper-snake)."""

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details = details or {}

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}


class WireClient:
    """One spawned sidecar process (its own process group) driven over newline-delimited JSON-RPC 2.0."""

    def __init__(self, cmd: list[str], env: dict[str, str], stderr_path: Path, cwd: Path | None = None) -> None:
        self._stderr = open(stderr_path, "wb")
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        self._ids = itertools.count(1)
        self._replies: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._events: dict[str, queue.Queue[dict[str, Any]]] = {}
        self._early: dict[str, list[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._closed = threading.Event()
        self.stream_lines = 0
        self.bad_lines = 0
        self._reader = threading.Thread(target=self._read, name="sidecar-stdout", daemon=True)
        self._reader.start()

    # -- the reader ---------------------------------------------------------------------------------------------
    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                msg = json.loads(raw)
            except ValueError:
                self.bad_lines += 1
                continue
            if not isinstance(msg, dict):
                continue
            if "jsonrpc" not in msg:
                self.stream_lines += 1
            elif "id" in msg and ("result" in msg or "error" in msg):
                with self._lock:
                    waiting = self._replies.get(msg["id"])
                if waiting is not None:
                    waiting.put(msg)
            elif msg.get("method") == "event":
                self._route_event(msg.get("params") or {})
        self._closed.set()
        with self._lock:
            for waiting in self._replies.values():
                waiting.put({"error": {"code": -1, "message": "the sidecar closed its stdout", "data": {}}})
            for events in self._events.values():
                events.put({"event": "__closed__"})

    def _route_event(self, params: dict[str, Any]) -> None:
        sub = str(params.get("subscription_id"))
        with self._lock:
            target = self._events.get(sub)
            if target is None:  # pushed before the subscribe answer reached us
                self._early.setdefault(sub, []).append(params)
                return
        target.put(params)

    # -- requests -----------------------------------------------------------------------------------------------
    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        line = json.dumps(message, ensure_ascii=False).encode() + b"\n"
        try:
            with self._send_lock:  # steps run on threads: one whole line at a time
                self.proc.stdin.write(line)
                self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise WireError("SIDECAR_EXITED", "the sidecar is gone (its stdin is closed)") from None

    def call(self, method: str, params: Any = None, timeout: float = 60.0) -> Any:
        """The request's result; a JSON-RPC error becomes a :class:`WireError` with the phase-2 code."""
        rid = next(self._ids)
        waiting: queue.Queue[dict[str, Any]] = queue.Queue()
        with self._lock:
            self._replies[rid] = waiting
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        try:
            if self._closed.is_set():
                raise WireError("SIDECAR_EXITED", f"the sidecar exited before {method}")
            self._send(message)
            try:
                reply = waiting.get(timeout=timeout)
            except queue.Empty:
                raise WireError("TIMEOUT", f"{method} got no answer within {timeout:.0f} s") from None
        finally:
            with self._lock:
                self._replies.pop(rid, None)
        if "error" in reply:
            err = reply["error"]
            data = err.get("data") or {}
            code = data.get("code") or ("SIDECAR_EXITED" if err.get("code") == -1 else f"JSONRPC_{err.get('code')}")
            raise WireError(code, str(err.get("message", "")), {"method": method, **(data.get("details") or {})})
        return reply["result"]

    def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self._send(message)

    def follow(
        self,
        resource_id: str,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        timeout: float = 300.0,
    ) -> list[dict[str, Any]]:
        """Subscribe to a job's or run's events and return them up to its terminal event (deduped by sequence)."""
        events: queue.Queue[dict[str, Any]] = queue.Queue()
        sub = self.call("events/subscribe", {"resource_id": resource_id})["subscription_id"]
        with self._lock:
            self._events[sub] = events
            for early in self._early.pop(sub, []):
                events.put(early)
        seen: dict[int, dict[str, Any]] = {}
        try:
            while True:
                try:
                    item = events.get(timeout=timeout)
                except queue.Empty:
                    raise WireError("TIMEOUT", f"no event of {resource_id} within {timeout:.0f} s") from None
                if item.get("event") == "__closed__":
                    raise WireError("SIDECAR_EXITED", f"the sidecar exited while {resource_id} ran")
                if item["id"] in seen:
                    continue
                seen[item["id"]] = item
                if on_event is not None:
                    on_event(item)
                if item["event"] in TERMINAL_EVENTS:
                    return [seen[k] for k in sorted(seen)]
        finally:
            with self._lock:
                self._events.pop(sub, None)

    # -- the end ------------------------------------------------------------------------------------------------
    def close(self, timeout: float = 30.0) -> int:
        """``shutdown`` + ``exit`` (or EOF), then wait; the whole group is killed if it does not leave in time."""
        try:
            if self.proc.poll() is None and not self._closed.is_set():
                self.call("shutdown", timeout=timeout)
                self.notify("exit")
        except WireError:
            pass
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            code = self.proc.wait(timeout=10)
        self._reader.join(timeout=5)
        self._stderr.close()
        return code
