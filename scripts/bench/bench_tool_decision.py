#!/usr/bin/env python3
"""The local model's tool decisions, fast: the model loaded once in-process, every decision through the provider.

    .venv/bin/python scripts/bench/bench_tool_decision.py [--set bench|heldout|both] [--only ID,...] [--json OUT]

Each case is one request to :class:`sidecar.providers.local.LocalAdapter` (the real decision code: the ranking
with the memory store's embedder, the prompts, the constrained generations) over an in-process runtime that runs
the worker's own ``generate`` (:class:`sidecar.localmodel.worker.Worker`, f32 like the e2e tests: greedy output
is the same run to run). The arguments step is skipped (``{}`` is written): only the decision is scored — the
tool the adapter called, or ``answer`` when it called none. ``BENCH_ARGUMENTS=1`` runs the arguments step too and
prints what it wrote and the call's arguments (not scored). The arguments step runs on the arguments model (the
packaged 1.5B, loaded into the same worker when first asked for) as in the sidecar; ``BENCH_GGUF=path`` runs
another GGUF in place of the packaged decision model (loaded directly: the arguments still go to the arguments
model, unlike ``options.model_path``); bench_tool_generalisation.py's ``--arguments-model`` sets the option.

Two sets:

* ``bench`` — agent-core-v1's 31 first prompts (the tool its case expects first, ``answer`` for irrelevance), plus
  decisions after a first result: its two multi-step cases (the second tool) and seven single-tool cases (the
  answer: a second tool fails the case's tool selection);
* ``heldout`` — ``tests/fixtures/tool_decisions_heldout.jsonl``: 36 requests (18 zh, 18 en) in other wordings,
  never used to tune prompt text (the router's margin, see localtools.routed, was chosen on both sets);
  ``HELDOUT_FILE`` runs another file of that form in its place.

Prints one line per case (expected, decided, ok, the decision's time to first token and wall time), then the
accuracy per set, per kind (tool / answer / after a result) and per language, and the decisions' prompt tokens
(the work each first token waits for; unlike the times, the same on any machine at any load: two commits' prompts
are compared by it when the machine's speed drifts between runs). Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from sidecar.agent.tools.builtin import default_registry  # noqa: E402
from sidecar.ir import MetonaRequest  # noqa: E402
from sidecar.localmodel.worker import Worker  # noqa: E402
from sidecar.providers.base import ProviderConfig  # noqa: E402
from sidecar.providers.local import LocalAdapter  # noqa: E402

TOOLS = [
    "get_current_time",
    "calculator",
    "read_file",
    "write_file",
    "list_directory",
    "search_files",
    "knowledge_search",
]
HELDOUT = Path(os.environ.get("HELDOUT_FILE") or ROOT / "tests" / "fixtures" / "tool_decisions_heldout.jsonl")
BENCH = ROOT / "datasets" / "agent-core-v1" / "cases.jsonl"
# decisions after a first result in agent-core-v1's cases: (case id, the call made, its result's summary, expected)
DEADLOCK = "[1] note_deadlock (死锁): 死锁发生需要同时满足四个必要条件：互斥、占有并等待、不可剥夺和循环等待。"
TCP = (
    "[1] note_tcp_handshake (TCP connection setup): TCP opens a connection with a three-way handshake: the client "
    "sends SYN, the server answers SYN-ACK, and the client replies ACK."
)
POSTGRES = "1 matches for 'PostgreSQL' in .\ndocs/db.md:1: We moved from MySQL to PostgreSQL."
REDIS = "1 matches for 'Redis' in .\ndocs/cache.md:1: 会话缓存放在 Redis 里。"
AFTER = [
    ("agent-write-004", "knowledge_search", {"query": "死锁"}, DEADLOCK, "write_file"),
    ("agent-write-005", "calculator", {"expression": "19 * 23"}, "19 * 23 = 437", "write_file"),
    ("agent-calc-001", "calculator", {"expression": "(17 + 25) * 3"}, "(17 + 25) * 3 = 126", "answer"),
    ("agent-time-001", "get_current_time", {"timezone": "Asia/Shanghai"}, "2026-12-02T13:05:00+08:00", "answer"),
    ("agent-file-002", "list_directory", {"path": "reports"}, "reports/q1.md\nreports/q2.md", "answer"),
    ("agent-rag-002", "knowledge_search", {"query": "TCP connection"}, TCP, "answer"),
    ("agent-file-003", "search_files", {"query": "PostgreSQL"}, POSTGRES, "answer"),
    ("agent-file-005", "search_files", {"query": "Redis"}, REDIS, "answer"),
    (
        "agent-write-002",
        "write_file",
        {"path": "summary.txt", "content": "Q2 revenue grew 20%"},
        "wrote 19 B",
        "answer",
    ),
]


class Out:
    """The worker's output, kept: the deltas of the job running."""

    def __init__(self) -> None:
        self.deltas: list[str] = []

    def delta(self, job_id: str, text: str) -> None:
        self.deltas.append(text)

    def progress(self, *args: Any, **kwargs: Any) -> None:
        pass


class InProcessRuntime:
    """The worker's generate in this process; the arguments step answers ``{}`` without the model."""

    def __init__(self, root: Path) -> None:
        self.out = Out()
        self.worker = Worker(self.out)  # type: ignore[arg-type]
        job = {"root": str(root), "precision": "f32"}
        if os.environ.get("BENCH_GGUF"):  # another GGUF than the packaged one (options.model_path's way)
            job["path"] = os.environ["BENCH_GGUF"]
        self.info = self.worker.load(job, "load")
        self.root = root
        self.arguments_loaded = False
        self.decisions: list[dict[str, Any]] = []

    def loaded_info(self, model_path: str | None) -> dict[str, Any] | None:
        return dict(self.worker._info)

    async def generate(self, payload: dict[str, Any], on_delta: Any, *, model_path: str | None = None) -> dict:
        if "json_schema" in payload and "prefix" in payload and not os.environ.get("BENCH_ARGUMENTS"):
            await on_delta("{}")
            return {"input_tokens": 0, "output_tokens": 1, "finish": "stop"}
        self.out.deltas = []
        t0 = time.perf_counter()
        if payload.get("slot") == "arguments" and not self.arguments_loaded:  # as LocalRuntime does, on first need
            self.worker.load({"root": str(self.root), "precision": "f32", "slot": "arguments"}, "load")
            self.arguments_loaded = True
        result = self.worker.generate(payload, "job")
        if "regex" in payload:
            self.decisions.append({**result, "text": "".join(self.out.deltas), "wall_s": time.perf_counter() - t0})
        if "json_schema" in payload and os.environ.get("BENCH_ARGUMENTS"):
            print("   wrote", repr("".join(self.out.deltas))[:300], result.get("finish"), flush=True)
        for piece in self.out.deltas:
            await on_delta(piece)
        return result


def _message(prompt: str, done: list[list[Any]]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt, "timestamp": 1}]
    for i, (name, args, summary) in enumerate(done):
        call_id = f"c{i}"
        call = {"id": call_id, "name": name, "args": args, "iteration": i + 1, "timestamp": 2}
        result = {"toolCallId": call_id, "toolName": name, "result": summary, "summary": summary, "success": True}
        result.update(durationMs=1, timestamp=3)
        messages.append({"role": "assistant", "content": "", "toolCalls": [call], "timestamp": 2})
        messages.append({"role": "tool", "content": "", "toolResult": result, "timestamp": 3})
    return messages


def bench_cases() -> list[dict[str, Any]]:
    cases = []
    prompts = {}
    for line in BENCH.read_text(encoding="utf-8").splitlines():
        case = json.loads(line)
        prompts[case["case_id"]] = case
        lang = next((t for t in case["tags"] if t in ("zh", "en")), "x")
        expect = case["expected_tools"][0] if case["expected_tools"] else "answer"
        cases.append({"id": case["case_id"], "lang": lang, "prompt": case["prompt"], "expect": expect})
    for case_id, name, args, summary, expect in AFTER:
        case = prompts[case_id]
        lang = next((t for t in case["tags"] if t in ("zh", "en")), "x")
        cases.append({"id": case_id + "+1", "lang": lang, "prompt": case["prompt"],
                      "done": [[name, args, summary]], "expect": expect})  # fmt: skip
    return cases


def heldout_cases() -> list[dict[str, Any]]:
    return [json.loads(line) for line in HELDOUT.read_text(encoding="utf-8").splitlines() if line.strip()]


def kind(case: dict[str, Any]) -> str:
    return "after" if case.get("done") else ("answer" if case["expect"] == "answer" else "tool")


async def decide(adapter: LocalAdapter, tools: list[Any], case: dict[str, Any]) -> str:
    data = {
        "meta": {"sessionId": "s", "iteration": 1, "requestId": "r", "timestamp": 1, "agentVersion": "1"},
        "systemPrompt": {
            "roleDefinition": "You are Metona.",
            "outputConstraints": "",
            "safetyGuidelines": "",
            "dynamicReminders": "",
        },
        "messages": _message(case["prompt"], case.get("done") or []),
        "params": {"maxTokens": 1},
        "tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools],
    }
    response = await adapter.send_stream(MetonaRequest.model_validate(data), lambda e: None)
    if response.tool_calls and os.environ.get("BENCH_ARGUMENTS"):
        print("   args", json.dumps(response.tool_calls[0].args, ensure_ascii=False), flush=True)
    return response.tool_calls[0].name if response.tool_calls else "answer"


async def main_async(args: argparse.Namespace) -> int:
    root = Path(os.environ.get("METONA_LOCAL_MODEL_DIR") or ROOT / ".cache" / "local-model")
    t0 = time.perf_counter()
    runtime = InProcessRuntime(root)
    print(f"model loaded in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    config = ProviderConfig(provider_id="local", preset="local", protocol="local", base_url="local://embedded",
                            options={})  # fmt: skip
    adapter = LocalAdapter(config, runtime=runtime)
    tools = default_registry().definitions(TOOLS)
    sets = {"bench": bench_cases, "heldout": heldout_cases}
    chosen = list(sets) if args.set == "both" else [args.set]
    only = set(args.only.split(",")) if args.only else None
    report: dict[str, Any] = {}
    for name in chosen:
        rows = []
        for case in sets[name]():
            if only and case["id"] not in only:
                continue
            runtime.decisions.clear()
            t1 = time.perf_counter()
            decided = await decide(adapter, tools, case)
            wall = time.perf_counter() - t1
            ttft = [d.get("ttft_ms", 0.0) for d in runtime.decisions]
            score = [d.get("score") for d in runtime.decisions]
            tokens = [int(d.get("input_tokens") or 0) for d in runtime.decisions]
            row = {**case, "decided": decided, "ok": decided == case["expect"], "wall_s": round(wall, 3),
                   "decisions": len(runtime.decisions), "ttft_ms": ttft, "score": score,
                   "prompt_tokens": tokens}  # fmt: skip
            rows.append(row)
            mark = "ok " if row["ok"] else "BAD"
            scored = " ".join(f"{x:.2f}" for x in score if x is not None)
            print(f"{mark} {name:7} {case['id']:18} {case['lang']:2} {kind(case):6} want {case['expect']:16} "
                  f"got {decided:16} {scored:6} {wall:5.2f}s ttft {','.join(f'{t:.0f}' for t in ttft)}ms  "
                  f"{case['prompt'][:40]!r}", flush=True)  # fmt: skip
        report[name] = rows
    print()
    for name, rows in report.items():
        groups: dict[str, list[bool]] = {"all": []}
        for r in rows:
            for key in ("all", kind(r), r["lang"]):
                groups.setdefault(key, []).append(r["ok"])
        text = "  ".join(f"{k} {sum(v)}/{len(v)}" for k, v in groups.items())
        ttfts = [t for r in rows for t in r["ttft_ms"]]
        walls = [r["wall_s"] for r in rows]
        tokens = [t for r in rows for t in r["prompt_tokens"]]
        print(f"{name}: {text}  | decision ttft median {statistics.median(ttfts):.0f} ms, "
              f"max {max(ttfts):.0f} ms; per case median {statistics.median(walls):.2f} s; "
              f"decision prompts {sum(tokens)} tokens in {len(tokens)} "
              f"(median {statistics.median(tokens):.0f})")  # fmt: skip
    if args.json:
        await anyio.Path(args.json).write_text(json.dumps(report, ensure_ascii=False, indent=1))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", choices=("bench", "heldout", "both"), default="both")
    parser.add_argument("--only", help="comma-separated case ids")
    parser.add_argument("--json", help="write the per-case rows here")
    return anyio.run(main_async, parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
