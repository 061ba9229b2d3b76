"""Fuzz the real sidecar over stdio from the method catalog in ``ipc_schema/`` (issue 21).

    python scripts/fuzz_stdio.py --lines 100000 --seed 1      # the long run; figures as JSON on stdout
    python scripts/fuzz_stdio.py --lines 300                  # the short run the test suite makes

Every method of ``ipc_schema/metona-sidecar.schema.json`` gets params generated from its schema, then broken:
wrong types, huge numbers and strings, deep nesting, unknown ids, path traversal, NUL and lone surrogates,
missing and unknown keys. Between them go cut lines, garbage bytes, duplicate ids, batches and notifications.
The run fails (exit 1) unless: the process never died, every stdout line was one JSON value, every request was
answered exactly once (a batch's members included; a reused id counts each use), no answer was
``INTERNAL_ERROR`` (each one is a bug), the sidecar still answers a ping at the end, every SQLite file under the
data dir passes ``PRAGMA integrity_check``, every LanceDB table opens, and it exits cleanly on ``shutdown``/``exit``.
Answers are matched to what was sent by :class:`Ledger` (exactly, at the end); every wait for an answer is bounded
(``--stall``): a stall fails the run and names what is unanswered. The figures include the answers by error code
and the sidecar's peak RSS; ``--progress`` prints a line to stderr every N lines.

Left out (they would reach the network or load models, which a test may not): :data:`SKIPPED`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import random
import shutil
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


class _Stalled(Exception):
    """Requests are owed and nothing came for the stall timeout."""


class Ledger:
    """What the sidecar owes, line by line, and what it answered; settled exactly at the end.

    Each line sent is one of: a request answered with its id (``owe``); a line answered with id null (``owe_null``:
    a parse error, an Invalid Request the server cannot take an id from, an oversized line, an empty batch); a
    request that is an Invalid Request (params neither object nor array) but carries a readable id — answered with
    id null, or with its id when that id is already in flight (``DUPLICATE_REQUEST_ID`` is checked first), so either
    (``owe(either=True)``); or a notification (nothing). Answers are only counted while the run goes (their order is
    the server's), and matched at the end, id by id: an id's answers must lie between the certain and the possible,
    and the id-null answers must be the null lines plus the either-requests that were not answered by id.
    """

    def __init__(self) -> None:
        self.certain: dict[str, list[str]] = {}  # id (as JSON) -> labels of the requests answered with that id
        self.either: dict[str, list[str]] = {}  # id (as JSON) -> labels answered with that id or with null
        self.null: list[str] = []  # labels of the lines answered with id null
        self.answers: dict[str, int] = {}  # id (as JSON, "null" included) -> answers seen
        self.owed_total = 0
        self.answered_total = 0

    def owe(self, rid: Any, label: str, either: bool = False) -> None:
        (self.either if either else self.certain).setdefault(json.dumps(rid), []).append(label)
        self.owed_total += 1

    def owe_null(self, label: str) -> None:
        self.null.append(label)
        self.owed_total += 1

    def answered(self, rid: Any) -> None:
        key = json.dumps(rid)
        self.answers[key] = self.answers.get(key, 0) + 1
        self.answered_total += 1

    def owes(self, rid: Any) -> bool:
        key = json.dumps(rid)
        return self.answers.get(key, 0) < len(self.certain.get(key, []))

    def outstanding(self) -> int:
        return self.owed_total - self.answered_total

    def settle(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """``(unanswered, answered_twice)``: each names the id (null for the id-null lines) and what was sent."""
        unanswered: list[dict[str, Any]] = []
        twice: list[dict[str, Any]] = []
        null_from_either: list[str] = []
        for key in sorted(set(self.certain) | set(self.either) | set(self.answers) - {"null"}):
            certain, either = self.certain.get(key, []), self.either.get(key, [])
            got = self.answers.get(key, 0)
            if got < len(certain):
                unanswered.append({"id": json.loads(key), "missing": len(certain) - got, "sent": certain + either})
            elif got > len(certain) + len(either):
                twice.append({"id": json.loads(key), "extra": got - len(certain) - len(either), "sent": certain})
            else:
                null_from_either += either[: len(certain) + len(either) - got]
        nulls = self.answers.get("null", 0)
        owed_null = self.null + null_from_either
        if nulls < len(owed_null):
            unanswered.append({"id": None, "missing": len(owed_null) - nulls, "sent": owed_null[:20]})
        elif nulls > len(owed_null):
            twice.append({"id": None, "extra": nulls - len(owed_null), "sent": []})
        return unanswered, twice


def _peak_rss_kib(pid: int) -> int | None:
    """The process's peak resident set (VmHWM, Linux); None elsewhere or once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _lancedb_check(folder: Path) -> dict[str, Any]:
    """Open every LanceDB table under ``folder`` and count its rows (``{}``: the run made none)."""
    if not folder.is_dir():
        return {}
    import lancedb  # the harness runs in the project's environment

    db = lancedb.connect(str(folder))
    listed = db.list_tables() if hasattr(db, "list_tables") else db.table_names()
    names = listed.tables if hasattr(listed, "tables") else list(listed)
    return {name: db.open_table(name).count_rows() for name in names}


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


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def fuzz(
    lines: int,
    seed: int,
    cmd: list[str],
    keep: Path | None = None,
    stall_s: float = 120.0,
    progress_every: int = 0,
) -> dict[str, Any]:
    """Send ``lines`` fuzz lines; ``stall_s`` bounds every wait for an answer owed (then the run fails, naming what
    is unanswered); ``progress_every`` > 0 prints a progress line to stderr every that many lines."""
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
    ledger = Ledger()
    figures: dict[str, Any] = {"lines": 0, "requests": 0, "answers": 0, "batches": 0, "garbage": 0, "cut": 0}
    by_code: dict[str, int] = {}
    internal: list[dict[str, Any]] = []
    next_id = 0
    started = time.monotonic()
    limits = {"max_line_bytes": 16 * 1024 * 1024}

    def take(message: Any) -> None:
        items = message if isinstance(message, list) else [message]
        for item in items:
            if not isinstance(item, dict) or "id" not in item or not ("result" in item or "error" in item):
                continue  # a notification (event, progress)
            figures["answers"] += 1
            ledger.answered(item["id"])
            if item["id"] == "init" and isinstance(item.get("result"), dict):
                limit = ((item["result"].get("capabilities") or {}).get("limits") or {}).get("max_line_bytes")
                limits["max_line_bytes"] = limit or limits["max_line_bytes"]
            error = item.get("error") or {}
            data_code = (error.get("data") or {}).get("code") if isinstance(error.get("data"), dict) else None
            name = "result" if "result" in item else str(data_code or error.get("code"))
            by_code[name] = by_code.get(name, 0) + 1
            if error.get("code") == -32603 or data_code == "INTERNAL_ERROR":
                internal.append(item)

    def pump(timeout: float) -> bool:
        """Take what arrived; wait up to ``timeout`` for a first message. False: nothing came."""
        got = False
        while True:
            try:
                message = run.lines.get(timeout=0 if got else timeout)
            except queue.Empty:
                return got
            if message is EOFError:
                raise _Died
            take(message)
            got = True

    def wait_for(done: Any, what: str) -> None:
        """Pump until ``done()``; a stall (nothing at all for ``stall_s`` while waiting) fails the run."""
        while not done():
            if not pump(stall_s):
                raise _Stalled(f"{what}: nothing answered for {stall_s:.0f} s, {ledger.outstanding()} owed")

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

    def owe_request(message: dict[str, Any], label: str) -> None:
        figures["requests"] += 1
        ledger.owe(message["id"], f"{label} {message['method']}", either=gen.unstructured)

    def owe_null(label: str) -> None:
        figures["requests"] += 1
        ledger.owe_null(label)

    init = {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"client_info": {"name": "fuzz"}}}
    ledger.owe("init", "initialize")
    figures["requests"] += 1
    run.send(json.dumps(init).encode() + b"\n")
    names = sorted(methods)
    recent: list[bytes] = []
    died = False
    stalled = ""
    code: int | None = None
    peak_rss: int | None = None
    alive = False
    try:
        wait_for(lambda: not ledger.owes("init"), "initialize")  # its limits decide which lines are answered null
        for i in range(lines):
            figures["lines"] += 1
            label = f"line {i + 1}:"
            shape = rng.random()
            if shape < 0.80:
                message = request(names[i % len(names)] if rng.random() < 0.5 else rng.choice(names))
                ascii_only = rng.random() < 0.5
                payload = json.dumps(message, ensure_ascii=ascii_only, allow_nan=False).encode("utf-8", "surrogatepass")
                unreadable = _lone_surrogate(message) and not ascii_only  # raw: invalid UTF-8, a parse error
                if gen.too_deep or unreadable or len(payload) > limits["max_line_bytes"]:
                    owe_null(f"{label} unreadable {message['method']}")  # a parse error (or too large): id null
                else:
                    owe_request(message, label)
            elif shape < 0.86:
                figures["batches"] += 1
                batch, owed, deep = [], [], False
                for _ in range(rng.randint(0, 4)):
                    batch.append(request(rng.choice(names)))
                    owed.append((batch[-1], gen.unstructured))
                    deep = deep or gen.too_deep
                if not batch or deep or len(json.dumps(batch)) > limits["max_line_bytes"]:
                    owe_null(f"{label} batch")  # an empty batch is one Invalid Request, an unparsable one a parse error
                else:
                    for member, unstructured in owed:
                        gen.unstructured = unstructured
                        owe_request(member, f"{label} batch")
                payload = json.dumps(batch).encode()
            elif shape < 0.90:
                figures["cut"] += 1
                whole = json.dumps(request(rng.choice(names))).encode()
                payload = whole[: rng.randint(1, max(1, len(whole) - 1))]
                owe_null(f"{label} cut")  # a parse error, answered with id null
            elif shape < 0.94:
                figures["garbage"] += 1
                payload = bytes(rng.randrange(256) for _ in range(rng.randint(1, 80))).replace(b"\n", b" ")
                if not payload.strip():
                    payload = b"!"
                owe_null(f"{label} garbage")
            else:
                note = {"jsonrpc": "2.0", "method": rng.choice([*names, "$/cancelRequest", "nope"]),
                        "params": gen.any()}  # fmt: skip
                if not isinstance(note["params"], dict | list):
                    # params neither object nor array: not a notification but an Invalid Request, answered with
                    # id null (the control notification $/cancelRequest included)
                    owe_null(f"{label} notification {note['method']} with params {type(note['params']).__name__}")
                payload = json.dumps(note).encode()
            recent.append(payload[:300])
            del recent[:-5]
            if not run.send(payload + b"\n"):
                break
            pump(0)
            wait_for(lambda: ledger.outstanding() < MAX_OUTSTANDING, f"after line {i + 1}")
            if progress_every and (i + 1) % progress_every == 0:
                _log(
                    f"fuzz: {i + 1} lines, {figures['requests']} owed, {figures['answers']} answers, "
                    f"{ledger.outstanding()} outstanding, {time.monotonic() - started:.0f} s, "
                    f"peak RSS {_peak_rss_kib(run.proc.pid)} KiB"
                )
        wait_for(lambda: ledger.outstanding() <= 0, "at the end")
        ledger.owe("last-ping", "ping")
        figures["requests"] += 1
        run.send(b'{"jsonrpc":"2.0","id":"last-ping","method":"ping"}\n')
        wait_for(lambda: not ledger.owes("last-ping"), "the last ping")
        peak_rss = _peak_rss_kib(run.proc.pid)
        alive = run.proc.poll() is None
    except _Died:
        died = True
    except _Stalled as exc:
        stalled = str(exc)
        alive = run.proc.poll() is None
    finally:
        ledger.owe("bye", "shutdown")
        figures["requests"] += 1
        run.send(b'{"jsonrpc":"2.0","id":"bye","method":"shutdown"}\n{"jsonrpc":"2.0","method":"exit"}\n')
        try:
            code = run.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            run.proc.kill()
            code = run.proc.wait(timeout=10)
        run.reader.join(timeout=10)
        run.stderr.close()
    with contextlib.suppress(_Died):
        pump(0)
    integrity = {}
    for path in sorted(data.rglob("*.sqlite3")) + sorted(data.rglob("*.db")):
        conn = sqlite3.connect(path)
        try:
            integrity[str(path.relative_to(data))] = conn.execute("PRAGMA integrity_check").fetchone()[0]
        finally:
            conn.close()
    try:
        lance: Any = _lancedb_check(data / "lancedb")
        lance_ok = True
    except Exception as exc:  # what opening the store raised is the finding
        lance, lance_ok = f"{type(exc).__name__}: {exc}", False
    unanswered, twice = ledger.settle()
    figures.update(
        seconds=round(time.monotonic() - started, 1),
        crashes=1 if died else 0,
        stalled=stalled,
        exit_code=code,
        peak_rss_kib=peak_rss,
        bad_stdout_lines=len(run.bad_stdout),
        unanswered=sum(u["missing"] for u in unanswered),
        answered_twice=sum(t["extra"] for t in twice),
        internal_errors=len(internal),
        answers_by_code=dict(sorted(by_code.items(), key=lambda kv: -kv[1])),
        sqlite_integrity=integrity,
        lancedb_tables=lance,
        data_dir=str(data),
        skipped_methods=sorted(SKIPPED),
        methods=len(methods),
    )
    figures["examples"] = {
        "internal_errors": internal[:5],
        "unanswered": unanswered[:10],
        "answered_twice": twice[:10],
        "bad_stdout": [b.decode("utf-8", "replace") for b in run.bad_stdout[:3]],
        "last_lines_before_death": [b.decode("utf-8", "replace") for b in recent] if died else [],
    }
    figures["clean"] = (
        alive
        and not died
        and not stalled
        and code == 0
        and not run.bad_stdout
        and not unanswered
        and not twice
        and not internal
        and all(v == "ok" for v in integrity.values())
        and lance_ok
    )
    if keep is None and figures["clean"]:  # a temp folder is kept only when there is something to look at
        shutil.rmtree(tmp, ignore_errors=True)
        figures["data_dir"] = None
    return figures


def main(argv: list[str] | None = None) -> int:
    sys.setrecursionlimit(100_000)  # the deep-nesting mutation is serialised by json.dumps here
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    keep_help = "a folder to use and keep (default: a temp one, removed after a clean run)"
    parser.add_argument("--keep", type=Path, default=None, help=keep_help)
    parser.add_argument("--stall", type=float, default=120.0, help="seconds without an answer owed: the run fails")
    parser.add_argument("--progress", type=int, default=5000, help="a progress line on stderr every N lines")
    args = parser.parse_args(argv)
    cmd = os.environ.get("SIDECAR_CMD")
    figures = fuzz(
        args.lines,
        args.seed,
        cmd.split() if cmd else [sys.executable, "-m", "sidecar"],
        args.keep,
        stall_s=args.stall,
        progress_every=args.progress,
    )
    print(json.dumps(figures, indent=1, ensure_ascii=False, default=str))
    return 0 if figures["clean"] else 1


if __name__ == "__main__":
    sys.exit(main())
