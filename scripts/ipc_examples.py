#!/usr/bin/env python3
"""The method examples of the reference (``ipc_schema/examples.json``): load, resolve, run against a real sidecar.

    python scripts/ipc_examples.py --record          # run every example, write the answers of those without one
    python scripts/ipc_examples.py --record --all    # run every example and rewrite every answer
    python scripts/ipc_examples.py --check           # run every example and report what does not hold

``examples.json`` maps a method name to a list of examples (the first is the method's main one), in the order they
run on ONE sidecar (fresh data dir, initialized by the ``initialize`` example, ended by ``shutdown``). An example:

    {"title": "...",                      optional (the docs' heading; default: the method name)
     "note": "...",                       optional (a sentence shown under it in the docs)
     "before": [{"method", "params", "until"}],   optional: calls repeated until their result contains ``until``
     "params": {...},                     optional; omitted = no params
     "result": <answer> | "error": {...}} the recorded answer (written by --record; shown in the docs)

A string ``"${METHOD.path.to.field}"`` in params stands for that field of METHOD's main example's answer (an earlier
one; ``METHOD#1`` is its second example); inside a longer string it is replaced in place. ``${files}`` is a folder
holding ``tests/docs/files/``; its ``plugins-incoming/`` packages are handed over in
``<data dir>/plugins/.incoming/<package_id>/`` (``${python}`` and ``${root}`` in their plugin.json: this interpreter,
the checkout). Recorded answers show ``/home/me/...`` paths instead of this machine's.

``tests/docs/test_examples.py`` runs them all: each answer must validate against the method's result schema and
have the recorded answer's shape (same keys, same JSON types); an error example must answer the same code.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "ipc_schema" / "examples.json"
FILES = ROOT / "tests" / "docs" / "files"
DOCS_FILES_DIR = "/home/me/Documents"  # what ${files} reads as in the docs
DOCS_DATA_DIR = "/home/me/.local/share/metona"  # the recorded answers' data dir
PLACEHOLDER = re.compile(r"\$\{([^}]+)\}")


def load(path: Path = EXAMPLES) -> dict[str, list[dict[str, Any]]]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    return {k: v for k, v in raw.items() if not k.startswith("$")}


def _lookup(answers: dict[str, Any], ref: str, files: str) -> Any:
    if ref == "files":
        return files
    method, _, path = ref.partition(".")
    if method not in answers:
        raise KeyError(f"${{{ref}}}: {method} has no answer yet (an example may only use those above it)")
    value = answers[method]
    for part in path.split(".") if path else []:
        try:
            value = value[int(part)] if isinstance(value, list) else value[part]
        except (KeyError, IndexError, ValueError, TypeError):
            raise KeyError(f"${{{ref}}}: no {part!r} in {json.dumps(value)[:300]}") from None
    return value


def substitute(node: Any, answers: dict[str, Any], files: str) -> Any:
    """Replace every ``${...}`` in ``node`` by the answer it names (whole-string placeholders keep the JSON type)."""
    if isinstance(node, str):
        whole = PLACEHOLDER.fullmatch(node)
        if whole:
            return _lookup(answers, whole[1], files)
        return PLACEHOLDER.sub(lambda m: str(_lookup(answers, m[1], files)), node)
    if isinstance(node, dict):
        return {k: substitute(v, answers, files) for k, v in node.items()}
    if isinstance(node, list):
        return [substitute(v, answers, files) for v in node]
    return node


def resolved(examples: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The examples as the docs show them: placeholders filled from the recorded answers."""
    answers: dict[str, Any] = {}
    out: dict[str, list[dict[str, Any]]] = {}
    for method, items in examples.items():
        out[method] = []
        for ex in items:
            shown = dict(ex)
            try:
                shown["params"] = substitute(ex.get("params"), answers, DOCS_FILES_DIR)
                shown["before"] = [
                    {**b, "params": substitute(b.get("params"), answers, DOCS_FILES_DIR)} for b in ex.get("before", [])
                ]
            except (KeyError, IndexError, TypeError):
                pass  # not recorded yet: shown as written
            if shown.get("params") is None:
                shown.pop("params", None)
            out[method].append(shown)
            if "result" in ex:
                answers.setdefault(method, ex["result"])
                answers[f"{method}#{len(out[method]) - 1}"] = ex["result"]
    return out


def contains(value: Any, expected: Any) -> bool:
    """``expected``'s keys hold in ``value`` (a list in expected: any of its values)."""
    if isinstance(expected, dict):
        return isinstance(value, dict) and all(k in value and contains(value[k], v) for k, v in expected.items())
    if isinstance(expected, list):
        return value in expected
    return bool(value == expected)


def shape(value: Any) -> Any:
    """Keys and JSON types (a list: the shape of its first item)."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "null" if value is None else type(value).__name__


def shape_differences(live: Any, recorded: Any, where: str = "result") -> list[str]:
    """Where ``live`` has another shape than ``recorded``; null on either side and empty lists match anything."""
    if live is None or recorded is None:
        return []
    if isinstance(recorded, dict):
        if not isinstance(live, dict):
            return [f"{where}: an object was recorded, {shape(live)} answered"]
        if isinstance(recorded.get("available"), bool):
            # a component's status ({available, version?, path?, detail?}): its other keys are the machine's (the
            # mermaid bundle installed or not, the binary without the local model), only `available` is the contract
            return [] if isinstance(live.get("available"), bool) else [f"{where}: no boolean `available` answered"]
        out = [f"{where}: keys {sorted(set(live) ^ set(recorded))} differ"] if set(live) != set(recorded) else []
        for k in set(live) & set(recorded):
            out += shape_differences(live[k], recorded[k], f"{where}.{k}")
        return out
    if isinstance(recorded, list):
        if not isinstance(live, list):
            return [f"{where}: a list was recorded, {shape(live)} answered"]
        return shape_differences(live[0], recorded[0], f"{where}[0]") if live and recorded else []
    return [] if shape(live) == shape(recorded) else [f"{where}: {shape(recorded)} recorded, {shape(live)} answered"]


class Run:
    """Every example sent, in order, to one sidecar (``call(method, params, timeout)`` → the JSON-RPC reply)."""

    def __init__(
        self, call: Callable[[str, Any, float], dict[str, Any]], files: str, log: Callable[[str], None] | None = None
    ) -> None:
        self.call = call
        self.log = log or (lambda line: None)
        self.files = files
        self.answers: dict[str, Any] = {}
        self.replies: dict[str, list[dict[str, Any]]] = {}

    def run(self, examples: dict[str, list[dict[str, Any]]], timeout: float = 30.0) -> None:
        for method, items in examples.items():
            self.replies[method] = []
            for ex in items:
                for step in ex.get("before", []):
                    self._until(step, timeout)
                params = substitute(ex.get("params"), self.answers, self.files)
                started = time.monotonic()
                reply = self.call(method, params, timeout)
                took = time.monotonic() - started
                self.log(f"{method}: {json.dumps(reply.get('error')) if 'error' in reply else 'result'} ({took:.2f} s)")
                self.replies[method].append(reply)
                if "result" in reply:
                    self.answers.setdefault(method, reply["result"])
                    self.answers[f"{method}#{len(self.replies[method]) - 1}"] = reply["result"]

    def _until(self, step: dict[str, Any], timeout: float) -> None:
        params = substitute(step.get("params"), self.answers, self.files)
        deadline = time.monotonic() + timeout
        while True:
            reply = self.call(step["method"], params, timeout)
            if "result" in reply and contains(reply["result"], step.get("until", {})):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{step['method']} never answered {step.get('until')}: last {reply}")
            time.sleep(0.05)


def run_on_sidecar(
    examples: dict[str, list[dict[str, Any]]], workdir: Path, log: Callable[[str], None] | None = None
) -> Run:
    sys.path.insert(0, str(ROOT))
    from tests.support.sidecar_proc import Sidecar

    files = workdir / "files"
    shutil.copytree(FILES, files, ignore=shutil.ignore_patterns("plugins-incoming"))
    # plugin packages as the host hands them over (<data>/plugins/.incoming/<package_id>/), commands made absolute
    for package in (FILES / "plugins-incoming").iterdir():
        target = workdir / "data" / "plugins" / ".incoming" / package.name
        target.mkdir(parents=True)
        manifest = (package / "plugin.json").read_text(encoding="utf-8")
        manifest = manifest.replace("${python}", sys.executable).replace("${root}", str(ROOT))
        (target / "plugin.json").write_text(manifest, encoding="utf-8")
    (workdir / "data").mkdir(exist_ok=True)
    sidecar = Sidecar(workdir / "data", dev=False)
    run = Run(lambda m, p, t: sidecar.call(m, p, t), str(files), log)
    try:
        run.run(examples)
        sidecar.notify("exit")
        sidecar.wait(15)
    finally:
        if sidecar.proc.poll() is None:
            sidecar.kill_9()
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--record", action="store_true", help="write the answers of the examples without one")
    parser.add_argument("--all", action="store_true", help="with --record: rewrite every answer")
    args = parser.parse_args()
    raw = json.loads(EXAMPLES.read_text(encoding="utf-8"))
    examples = load()
    with tempfile.TemporaryDirectory() as tmp:
        run = run_on_sidecar(examples, Path(tmp), lambda line: print(line, file=sys.stderr))
    # what the docs show instead of this machine's paths (longest first: the venv's python is under the checkout)
    shown = {f"{tmp}/files": DOCS_FILES_DIR, f"{tmp}/data": DOCS_DATA_DIR, sys.executable: "/usr/bin/python3"}
    shown[str(ROOT)] = "/opt/metona-plugins"
    problems = 0
    for method, items in examples.items():
        for ex, reply in zip(items, run.replies[method], strict=True):
            kind = "result" if "result" in reply else "error"
            if args.record and (args.all or ("result" not in ex and "error" not in ex)):
                ex.pop("result", None)
                ex.pop("error", None)
                text = json.dumps(reply[kind], ensure_ascii=False)
                for real, docs in sorted(shown.items(), key=lambda kv: -len(kv[0])):
                    text = text.replace(json.dumps(real)[1:-1], json.dumps(docs)[1:-1])
                ex[kind] = json.loads(text)
                print(f"recorded {method}: {kind}")
            elif kind not in ex:
                problems += 1
                print(f"{method}: answered {kind} {json.dumps(reply[kind])[:300]}")
    if args.record:
        raw.update(examples)
        EXAMPLES.write_text(json.dumps(raw, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 1 if problems and not args.record else 0


if __name__ == "__main__":
    raise SystemExit(main())
