"""Fuzz the real sidecar over stdio from the method catalog in ``ipc_schema/`` (issue 21).

    python scripts/fuzz_stdio.py --lines 100000 --seed 1      # the long run; figures as JSON on stdout
    python scripts/fuzz_stdio.py --lines 300                  # the short run the test suite makes

Every method of ``ipc_schema/metona-sidecar.schema.json`` gets params generated from its schema, then broken:
wrong types, huge numbers and strings, deep nesting, unknown ids, path traversal, NUL and lone surrogates,
missing and unknown keys. Between them go cut lines, garbage bytes, duplicate ids, batches and notifications.
The run fails (exit 1) unless: the process never died, every stdout line was one JSON value, every request was
answered exactly once (a batch's members included; a reused id counts each use), no answer was
``INTERNAL_ERROR`` (each one is a bug), the sidecar still answers a ping at the end, every SQLite file under the
data dir passes ``PRAGMA integrity_check``, and it exits cleanly on ``shutdown``/``exit``.

Left out (they would reach the network or load models, which a test may not): :data:`SKIPPED`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import random
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "ipc_schema" / "metona-sidecar.schema.json"
SKIPPED = frozenset(
    {
        "shutdown",  # ends the process under test (sent once, at the end)
        "chat/send",  # a provider the fuzz made could point at a public endpoint
        "chat/stream",
        "providers/test",
        "providers/health",
        "providers/models",
        "agent/runs/create",
        "benchmarks/agent/runs/create",  # loads models / runs whole datasets
        "benchmarks/rag/runs/create",
        "index/rebuild",
    }
)
STRINGS = [
    "",
    "x",
    "nope",
    "note_doesnotexist",
    "job_00000000000000000000",
    "../../../../etc/passwd",
    "/etc/passwd",
    "..\\..\\windows\\win.ini",
    "a\x00b",
    "\ud800",
    "\udfff lone",
    "%2e%2e/%2e%2e/x",
    "file:///etc/passwd",
    "http://127.0.0.1:9/x",
    "中文🙂",
    "$(rm -rf /)",
    "' OR 1=1 --",
]
NUMBERS = [0, -1, 1, 2**31, 2**63, -(2**63) - 1, 10**30, 1e308, -0.0, 0.5, 10**400]
MAX_OUTSTANDING = 32


# --- generation ---------------------------------------------------------------------------------------------------


class Generator:
    def __init__(self, doc: dict[str, Any], rng: random.Random) -> None:
        self.defs = doc["$defs"]
        self.rng = rng
        self.too_deep = False
        self.unstructured = False

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        seen = 0
        while "$ref" in node and seen < 50:
            node = self.defs[node["$ref"].rsplit("/", 1)[1]]
            seen += 1
        return node

    def valid(self, node: dict[str, Any], depth: int = 0) -> Any:
        """A value that mostly fits ``node``."""
        rng = self.rng
        node = self.resolve(node)
        if depth > 6:
            return None
        for key in ("anyOf", "oneOf"):
            if key in node:
                return self.valid(rng.choice(node[key]), depth + 1)
        if "allOf" in node:
            return self.valid(node["allOf"][0], depth + 1)
        if "const" in node:
            return node["const"]
        if "enum" in node:
            return rng.choice(node["enum"])
        kind = node.get("type")
        if isinstance(kind, list):
            kind = rng.choice(kind)
        if kind == "object" or "properties" in node:
            props = node.get("properties", {})
            required = set(node.get("required", []))
            out = {}
            for name, sub in props.items():
                if name in required or rng.random() < 0.4:
                    out[name] = self.valid(sub, depth + 1)
            return out
        if kind == "array":
            items = node.get("items", {})
            return [self.valid(items, depth + 1) for _ in range(rng.randint(0, 3))]
        if kind == "string":
            low, high = node.get("minLength", 0), min(node.get("maxLength", 24), 24)
            if rng.random() < 0.5:
                return rng.choice(STRINGS)
            return "".join(rng.choice("abcdefghij_-.") for _ in range(rng.randint(low, max(low, high))))
        if kind == "integer":
            low, high = node.get("minimum", -5), node.get("maximum", 1000)
            return rng.randint(int(low), int(min(high, low + 10_000)))
        if kind == "number":
            return rng.uniform(float(node.get("minimum", -5)), float(min(node.get("maximum", 1000), 1e6)))
        if kind == "boolean":
            return rng.random() < 0.5
        if kind == "null":
            return None
        return self.any(depth + 1)

    def any(self, depth: int = 0) -> Any:
        rng = self.rng
        choice = rng.randrange(7)
        if depth > 3 or choice == 0:
            return rng.choice([None, True, False, rng.choice(NUMBERS), rng.choice(STRINGS)])
        if choice == 1:
            return [self.any(depth + 1) for _ in range(rng.randint(0, 3))]
        if choice == 2:
            return {rng.choice(STRINGS): self.any(depth + 1) for _ in range(rng.randint(0, 3))}
        return rng.choice([*STRINGS, *NUMBERS])

    def broken(self, params: Any, node: dict[str, Any]) -> Any:
        """``params`` with one thing wrong (or left as it is, a third of the time)."""
        rng = self.rng
        mutation = rng.randrange(12)
        self.too_deep = False  # the whole line cannot be parsed: one answer with id null
        self.unstructured = False  # params neither object nor array: Invalid Request, answered with id null
        if mutation < 4 or not isinstance(params, dict):
            return params
        keys = list(params) or list(self.resolve(node).get("properties", {})) or ["x"]
        key = rng.choice(keys)
        if mutation == 4:
            params[key] = self.any()  # a wrong type
        elif mutation == 5:
            params[key] = rng.choice(NUMBERS)
        elif mutation == 6:
            params[key] = "A" * rng.choice([4096, 70_000, 1_100_000])
        elif mutation == 7:
            nested: Any = "deep"
            levels = rng.choice([50, 500, 5000])
            self.too_deep = levels >= 1000  # beyond the parser's depth: the whole line is a parse error
            for _ in range(levels):
                nested = [nested] if rng.random() < 0.5 else {"a": nested}
            params[key] = nested
        elif mutation == 8:
            params.pop(key, None)  # a required key missing
        elif mutation == 9:
            params["unknown_" + str(rng.randrange(100))] = 1
        elif mutation == 10:
            params[key] = rng.choice(STRINGS)
        else:
            return rng.choice([None, [], "params", 7])  # params that are not an object
        return params


# --- the run ------------------------------------------------------------------------------------------------------


def _lone_surrogate(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


class _Died(Exception):
    """The sidecar closed its stdout (it died)."""


class Run:
    def __init__(self, data_dir: Path, cmd: list[str]) -> None:
        env = dict(os.environ)
        env["METONA_DATA_DIR"] = str(data_dir)
        env["METONA_SECRET_KEY_FILE"] = str(data_dir.parent / "fuzz.key")
        env.pop("METONA_DEV_METHODS", None)
        self.stderr = open(data_dir.parent / "fuzz-stderr.log", "wb")
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, env=env, cwd=ROOT,
            start_new_session=True,
        )  # fmt: skip
        self.lines: queue.Queue[Any] = queue.Queue()
        self.bad_stdout: list[bytes] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                if not raw.endswith(b"\n"):
                    raise ValueError("no newline")
                self.lines.put(json.loads(raw))
            except ValueError:
                self.bad_stdout.append(raw[:300])
        self.lines.put(EOFError)

    def send(self, data: bytes) -> bool:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False


def fuzz(lines: int, seed: int, cmd: list[str], keep: Path | None = None) -> dict[str, Any]:
    doc = json.loads(SCHEMA.read_text("utf-8"))
    methods = {
        name: entry["properties"]["params"]
        for name, entry in doc["properties"]["methods"]["properties"].items()
        if name not in SKIPPED
    }
    rng = random.Random(seed)
    gen = Generator(doc, rng)
    tmp = Path(tempfile.mkdtemp(prefix="metona-fuzz-")) if keep is None else keep
    data = tmp / "data"
    data.mkdir(parents=True, exist_ok=True)
    run = Run(data, cmd)
    expected: dict[Any, int] = {}  # id -> answers still owed
    figures: dict[str, Any] = {"lines": 0, "requests": 0, "answers": 0, "batches": 0, "garbage": 0, "cut": 0}
    internal: list[dict[str, Any]] = []
    extra_answers: list[Any] = []
    next_id = 0
    started = time.monotonic()

    limits = {"max_line_bytes": 16 * 1024 * 1024}
    risky: dict[str, int] = {}  # requests the server may have to answer with id null (it cannot read their id)

    def owe(rid: Any, envelope_broken: bool = False) -> None:
        key = json.dumps(rid)
        expected[key] = expected.get(key, 0) + 1
        if envelope_broken:
            risky[key] = risky.get(key, 0) + 1
        figures["requests"] += 1

    def settle_null() -> bool:
        """An id-null answer: a cut/garbage line's, else one request whose envelope could not be read."""
        null = json.dumps(None)
        if expected.get(null, 0) > 0:
            expected[null] -= 1
            return True
        for key, count in risky.items():
            if count > 0 and expected.get(key, 0) > 0:
                risky[key] -= 1
                expected[key] -= 1
                return True
        return False

    def take(message: Any) -> None:
        items = message if isinstance(message, list) else [message]
        for item in items:
            if not isinstance(item, dict) or "id" not in item or not ("result" in item or "error" in item):
                continue  # a notification (event, progress)
            key = json.dumps(item["id"])
            figures["answers"] += 1
            if item["id"] == "init" and isinstance(item.get("result"), dict):
                limit = ((item["result"].get("capabilities") or {}).get("limits") or {}).get("max_line_bytes")
                limits["max_line_bytes"] = limit or limits["max_line_bytes"]
            if item["id"] is None:
                if not settle_null():
                    extra_answers.append(None)
            elif expected.get(key, 0) <= 0:
                extra_answers.append(item["id"])
            else:
                expected[key] -= 1
                if risky.get(key, 0) > 0:
                    risky[key] -= 1
            error = item.get("error") or {}
            data_code = (error.get("data") or {}).get("code") if isinstance(error.get("data"), dict) else None
            if error.get("code") == -32603 or data_code == "INTERNAL_ERROR":
                internal.append(item)

    def drain(block: bool) -> None:
        while True:
            try:
                message = run.lines.get(timeout=30 if block else 0)
            except queue.Empty:
                return
            if message is EOFError:
                raise _Died
            take(message)
            block = False

    def outstanding() -> int:
        return sum(v for v in expected.values() if v > 0)

    def request(method: str) -> dict[str, Any]:
        nonlocal next_id
        node = methods.get(method, {})
        params = gen.broken(gen.valid(node), node)
        next_id += 1
        rid: Any = next_id if rng.random() < 0.8 else f"s-{next_id}"
        if rng.random() < 0.02 and next_id > 2:
            rid = next_id - 1  # a duplicate id (the previous request's may still be in flight)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None or rng.random() < 0.5:
            message["params"] = params
        # params present but neither object nor array (null included): an Invalid Request, answered with id null
        gen.unstructured = "params" in message and not isinstance(params, dict | list)
        return message

    init = {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"client_info": {"name": "fuzz"}}}
    owe("init")
    run.send(json.dumps(init).encode() + b"\n")
    while expected.get(json.dumps("init"), 0):  # its limits decide which lines are answered with id null
        drain(block=True)
    names = sorted(methods)
    recent: list[bytes] = []
    died = False
    try:
        for i in range(lines):
            figures["lines"] += 1
            shape = rng.random()
            if shape < 0.80:
                message = request(names[i % len(names)] if rng.random() < 0.5 else rng.choice(names))
                ascii_only = rng.random() < 0.5
                payload = json.dumps(message, ensure_ascii=ascii_only, allow_nan=False).encode("utf-8", "surrogatepass")
                unreadable = _lone_surrogate(message) and not ascii_only  # raw: invalid UTF-8, a parse error
                if gen.too_deep or unreadable or len(payload) > limits["max_line_bytes"]:
                    owe(None)  # the line cannot be read: a parse error with id null
                else:
                    owe(message["id"], gen.unstructured)
            elif shape < 0.86:
                figures["batches"] += 1
                batch, owed, deep = [], [], False
                for _ in range(rng.randint(0, 4)):
                    batch.append(request(rng.choice(names)))
                    owed.append((batch[-1]["id"], gen.unstructured))
                    deep = deep or gen.too_deep
                if not batch or deep or len(json.dumps(batch)) > limits["max_line_bytes"]:
                    owe(None)  # an empty batch is one Invalid Request, an unparsable one a parse error: id null
                else:
                    for rid, unstructured in owed:
                        owe(rid, unstructured)
                payload = json.dumps(batch).encode()
            elif shape < 0.90:
                figures["cut"] += 1
                whole = json.dumps(request(rng.choice(names))).encode()
                payload = whole[: rng.randint(1, max(1, len(whole) - 1))]
                owe(None)  # a parse error, answered with id null
            elif shape < 0.94:
                figures["garbage"] += 1
                payload = bytes(rng.randrange(256) for _ in range(rng.randint(1, 80))).replace(b"\n", b" ")
                if not payload.strip():
                    payload = b"!"
                owe(None)
            else:
                note = {"jsonrpc": "2.0", "method": rng.choice([*names, "$/cancelRequest", "nope"]),
                        "params": gen.any()}  # fmt: skip
                if not isinstance(note["params"], dict | list):
                    owe(None)  # a parse error, or params neither object nor array: answered even without an id
                payload = json.dumps(note).encode()
            recent.append(payload[:300])
            del recent[:-5]
            if not run.send(payload + b"\n"):
                break
            drain(block=False)
            while outstanding() >= MAX_OUTSTANDING:
                drain(block=True)
        deadline = time.monotonic() + 120
        while outstanding() and time.monotonic() < deadline:
            drain(block=True)
        owe("last-ping")
        run.send(b'{"jsonrpc":"2.0","id":"last-ping","method":"ping"}\n')
        deadline = time.monotonic() + 60
        while expected.get(json.dumps("last-ping"), 0) and time.monotonic() < deadline:
            drain(block=True)
        alive = run.proc.poll() is None and expected.get(json.dumps("last-ping"), 1) == 0
    except _Died:
        alive, died = False, True
    finally:
        owe("bye")
        run.send(b'{"jsonrpc":"2.0","id":"bye","method":"shutdown"}\n{"jsonrpc":"2.0","method":"exit"}\n')
        try:
            code = run.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            run.proc.kill()
            code = run.proc.wait(timeout=10)
        run.reader.join(timeout=10)
        run.stderr.close()
    with contextlib.suppress(_Died):
        drain(block=False)
    integrity = {}
    for path in sorted(data.rglob("*.sqlite3")) + sorted(data.rglob("*.db")):
        conn = sqlite3.connect(path)
        try:
            integrity[str(path.relative_to(data))] = conn.execute("PRAGMA integrity_check").fetchone()[0]
        finally:
            conn.close()
    unanswered = {k: v for k, v in expected.items() if v > 0}
    figures.update(
        seconds=round(time.monotonic() - started, 1),
        crashes=0 if alive else 1,
        exit_code=code,
        bad_stdout_lines=len(run.bad_stdout),
        unanswered=len(unanswered),
        answered_twice=len(extra_answers),
        internal_errors=len(internal),
        sqlite_integrity=integrity,
        data_dir=str(data),
        skipped_methods=sorted(SKIPPED),
        methods=len(methods),
    )
    figures["examples"] = {
        "internal_errors": internal[:5],
        "unanswered": list(unanswered)[:5],
        "answered_twice": extra_answers[:5],
        "bad_stdout": [b.decode("utf-8", "replace") for b in run.bad_stdout[:3]],
        "last_lines_before_death": [b.decode("utf-8", "replace") for b in recent] if died else [],
    }
    figures["clean"] = (
        alive
        and code == 0
        and not run.bad_stdout
        and not unanswered
        and not extra_answers
        and not internal
        and all(v == "ok" for v in integrity.values())
    )
    return figures


def main(argv: list[str] | None = None) -> int:
    sys.setrecursionlimit(100_000)  # the deep-nesting mutation is serialised by json.dumps here
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", type=Path, default=None, help="use this folder (kept) instead of a temp one")
    args = parser.parse_args(argv)
    cmd = os.environ.get("SIDECAR_CMD")
    figures = fuzz(args.lines, args.seed, cmd.split() if cmd else [sys.executable, "-m", "sidecar"], args.keep)
    print(json.dumps(figures, indent=1, ensure_ascii=False, default=str))
    return 0 if figures["clean"] else 1


if __name__ == "__main__":
    sys.exit(main())
