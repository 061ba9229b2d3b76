#!/usr/bin/env python3
"""The embedded local model: load (cold with conversion, warm), time to first token, decode tokens/s, RSS and the
tool-call parse rate on a fixed prompt set — through the sidecar over stdio, beside the raw runtime called directly.

    python scripts/bench/bench_local_model.py [--runs 2] [--cold] [--threads N]

Goals (issue 15): ≥ 20 tok/s decode on 2 cores, warm load ≤ 3 s, sidecar overhead ≤ 1.1× the raw runtime (wall time
per answer, same greedy prompts and token counts). ``--cold`` also converts the model into a fresh folder (≈1 min,
≈2 GB of RAM). Raw and sidecar answers are interleaved (both models loaded, never generating at once);
medians are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from sidecar.localmodel import assets  # noqa: E402  (stdlib only)

MODEL_DIR = ROOT / ".cache" / "local-model"
PROMPTS = [
    "Explain in three sentences why the sky is blue.",
    "用三句话介绍一下长城。",
    "Write a Python function that reverses a string, with a docstring.",
]
MAX_TOKENS = 96


def _param(t: str, d: str) -> dict[str, str]:
    return {"type": t, "description": d}


def _tool(name: str, description: str, props: dict[str, dict[str, str]], required: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "parameters": {"type": "object", "properties": props, "required": required},
        "category": "custom",
        "riskLevel": "safe",
        "requiresPermission": False,
        "timeoutMs": 1000,
    }


TOOLS = [
    _tool(
        "calculator", "Evaluate an arithmetic expression", {"expression": _param("string", "e.g. 3*4")}, ["expression"]
    ),
    _tool("get_weather", "Current weather of a city", {"city": _param("string", "the city")}, ["city"]),
    _tool(
        "get_current_time", "The current time in a timezone", {"timezone": _param("string", "IANA name")}, ["timezone"]
    ),
]
TOOL_PROMPTS = [  # (prompt, the tool a correct answer calls; None: answer without a tool)
    ("What is 37*43?", "calculator"),
    ("What's the weather like in Paris right now?", "get_weather"),
    ("What time is it in Tokyo? Use the tool.", "get_current_time"),
    ("Compute (17 + 4) * 2 with the calculator.", "calculator"),
    ("北京现在天气怎么样？", "get_weather"),
    ("What is the capital of Japan?", None),
]


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


# ---- the raw runtime, in this process ------------------------------------------------------------------------


class Raw:
    """openvino-genai called directly: the same chat template, greedy config and streamer callback as the worker."""

    def __init__(self, folder: Path, threads: int | None) -> None:
        from sidecar.localmodel.convert import block_telemetry

        block_telemetry()  # as the worker does
        import openvino_genai as ov_genai

        self.ov = ov_genai
        props = {"INFERENCE_NUM_THREADS": threads} if threads else {}
        t0 = time.perf_counter()
        self.pipe = ov_genai.LLMPipeline(str(folder), "CPU", **props)
        self.load_s = time.perf_counter() - t0
        self.tok = self.pipe.get_tokenizer()

    def answer(self, prompt: str) -> tuple[float, float, float, int]:
        """(wall, ttft, decode tok/s, tokens) of one answer."""
        ov = self.ov
        messages = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": prompt}]
        config = ov.GenerationConfig(max_new_tokens=MAX_TOKENS, apply_chat_template=False)
        start = time.perf_counter()
        text = self.tok.apply_chat_template(messages, add_generation_prompt=True)
        stamps: list[float] = []

        def streamer(piece: str) -> Any:
            if piece:
                stamps.append(time.perf_counter())
            return ov.StreamingStatus.RUNNING

        result = self.pipe.generate([text], config, streamer)
        end = time.perf_counter()
        n = int(result.perf_metrics.get_num_generated_tokens())
        rate = (n - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 1 else float("nan")
        return end - start, stamps[0] - start, rate, n


# ---- the sidecar over stdio --------------------------------------------------------------------------------------


class Sidecar:
    def __init__(self, model_dir: Path, data_dir: Path, threads: int | None) -> None:
        env = dict(os.environ, METONA_LOCAL_MODEL_DIR=str(model_dir), METONA_DATA_DIR=str(data_dir))
        if threads:
            env["METONA_LOCAL_THREADS"] = str(threads)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sidecar"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, cwd=ROOT,
        )  # fmt: skip
        self._id = 0
        self.lines: list[tuple[float, dict[str, Any]]] = []
        self._cv = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            with self._cv:
                self.lines.append((time.perf_counter(), json.loads(raw)))
                self._cv.notify_all()

    def call(self, method: str, params: Any, timeout: float = 900) -> tuple[Any, list[tuple[float, dict[str, Any]]]]:
        self._id += 1
        rid = self._id
        mark = len(self.lines)
        assert self.proc.stdin is not None
        self.proc.stdin.write(
            (json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n").encode()
        )
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                for _t, msg in self.lines[mark:]:
                    if msg.get("id") == rid and ("result" in msg or "error" in msg):
                        return msg, self.lines[mark:]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(method)
                self._cv.wait(left)

    def worker_pid(self) -> int | None:
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text()
                    cmd = (entry / "cmdline").read_bytes()
                except OSError:
                    continue
                if b"sidecar.localmodel.worker" in cmd and int(stat.rsplit(")", 1)[1].split()[1]) == self.proc.pid:
                    return int(entry.name)
        return None

    def close(self) -> None:
        try:
            self.call("shutdown", None, timeout=30)
            assert self.proc.stdin is not None
            self.proc.stdin.write(b'{"jsonrpc":"2.0","method":"exit"}\n')
            self.proc.stdin.flush()
            self.proc.wait(30)
        except (TimeoutError, OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def ir(prompt: str, rid: str, tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    req: dict[str, Any] = {
        "meta": {"sessionId": "bench", "iteration": 1, "requestId": rid, "timestamp": 1, "agentVersion": "bench"},
        "systemPrompt": {
            "roleDefinition": "You are a helpful assistant.",
            "outputConstraints": "",
            "safetyGuidelines": "",
        },
        "messages": [{"role": "user", "content": prompt, "timestamp": 1}],
        "params": {"stream": True, "maxTokens": MAX_TOKENS},
    }
    if tools:
        req["tools"] = tools
    return req


def sidecar_answer(sc: Sidecar, prompt: str, rid: str) -> tuple[float, float, float, int]:
    start = time.perf_counter()
    reply, seen = sc.call("chat/stream", {"provider_id": "local", "request": ir(prompt, rid)})
    end = time.perf_counter()
    deltas = [t for t, m in seen if m.get("type") == "text_delta"]
    tokens = reply["result"]["usage"]["outputTokens"]
    rate = (tokens - 1) / (deltas[-1] - deltas[0]) if len(deltas) > 1 else float("nan")
    return end - start, deltas[0] - start, rate, tokens


def tool_parse_rate(sc: Sidecar) -> tuple[int, list[str]]:
    right, outcomes = 0, []
    for i, (prompt, expected) in enumerate(TOOL_PROMPTS):
        reply, _ = sc.call("chat/stream", {"provider_id": "local", "request": ir(prompt, f"t{i}", TOOLS)})
        calls = reply["result"].get("toolCalls") or []
        got = calls[0]["name"] if calls else None
        right += got == expected
        outcomes.append(f"{prompt[:30]!r}: expected {expected}, got {got}")
    return right, outcomes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2, help="rounds over the prompt set (default 2)")
    ap.add_argument("--cold", action="store_true", help="also time the first-use conversion into a fresh folder")
    ap.add_argument("--threads", type=int, default=None, help="inference threads (default: the runtime's)")
    args = ap.parse_args()
    ok, why = assets.status()
    if not ok:
        print(f"local model unavailable: {why}")
        return 2
    med = statistics.median
    if args.cold:
        with tempfile.TemporaryDirectory(prefix="metona-bench-cold-") as tmp:
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "sidecar", "local-model", "prepare", "--dir", tmp], check=True)
            print(f"cold: assemble + re-quantise + convert: {time.perf_counter() - t0:.1f} s")
    subprocess.run([sys.executable, "-m", "sidecar", "local-model", "prepare", "--dir", str(MODEL_DIR)], check=True)
    files = assets.assemble(MODEL_DIR)
    folder = files.converted_dir(MODEL_DIR)
    with tempfile.TemporaryDirectory(prefix="metona-bench-local-") as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        sc = Sidecar(MODEL_DIR, data, args.threads)
        try:
            sc.call("initialize", {"client_info": {"name": "bench"}})
            sc.call("providers/create", {"preset": "local"})
            t0 = time.perf_counter()
            assert "result" in sc.call("chat/stream", {"provider_id": "local", "request": ir("Say OK.", "w")})[0]
            first_use = time.perf_counter() - t0
            raw_model = Raw(folder, args.threads)
            raw: dict[str, list[float]] = {"wall": [], "ttft": [], "rate": [], "tokens": []}
            side: dict[str, list[float]] = {"wall": [], "ttft": [], "rate": [], "tokens": []}
            n = 0
            for _ in range(args.runs):  # interleaved: machine noise hits both sides alike
                for prompt in PROMPTS:
                    n += 1
                    for target, result in (
                        (raw, raw_model.answer(prompt)),
                        (side, sidecar_answer(sc, prompt, f"p{n}")),
                    ):
                        for key, value in zip(("wall", "ttft", "rate", "tokens"), result, strict=True):
                            target[key].append(value)
            right, outcomes = tool_parse_rate(sc)
            pid = sc.worker_pid()
            side_rss = _rss_mb(pid) if pid else float("nan")
            raw_rss = _rss_mb(os.getpid())  # this process: the raw runtime (+ the bench's own few MB)
            raw_load = raw_model.load_s
        finally:
            sc.close()
    print(f"prompts: {len(PROMPTS)} × {args.runs} runs, ≤ {MAX_TOKENS} new tokens, greedy (shared machine: noisy)")
    print(f"{'':24}{'raw runtime':>14}{'sidecar':>14}")
    load = f"{'warm load (s)':24}{raw_load:>14.2f}{first_use:>14.2f}"
    print(load + "   (sidecar: worker start + load + a 'Say OK.' answer)")
    print(f"{'TTFT median (s)':24}{med(raw['ttft']):>14.2f}{med(side['ttft']):>14.2f}")
    print(f"{'decode tok/s median':24}{med(raw['rate']):>14.1f}{med(side['rate']):>14.1f}")
    print(f"{'answer wall median (s)':24}{med(raw['wall']):>14.2f}{med(side['wall']):>14.2f}")
    print(f"{'tokens per answer':24}{med(raw['tokens']):>14.0f}{med(side['tokens']):>14.0f}")
    print(f"{'peak RSS (MB)':24}{raw_rss:>14.0f}{side_rss:>14.0f}   (sidecar: the worker)")
    pairs = [s_ / r_ for s_, r_ in zip(side["wall"], raw["wall"], strict=True)]
    total = sum(side["wall"]) / sum(raw["wall"])
    print(f"overhead (sidecar / raw wall time per answer): median {med(pairs):.3f}×, all {total:.3f}×   goal ≤ 1.1×")
    print(f"tool-call parse rate: {right}/{len(TOOL_PROMPTS)} prompts got the expected outcome")
    for line in outcomes:
        print(f"    {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
