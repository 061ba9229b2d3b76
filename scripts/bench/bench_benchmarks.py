#!/usr/bin/env python3
"""Benchmark-service figures (issue 14 goals), measured in-process on the production stack (tests/support/bench_env:
SQLite WAL, jobs, the embedded USE embedder, LanceDB, AgentService with the scripted mock):

1. a full ``rag-core-v1`` run in 3 modes (goal < 30 s), its indexing time, and hybrid hit@5 (goal >= 0.9);
2. the agent benchmark's own overhead per case beyond the agent run (goal < 50 ms): wall time of the run divided
   by cases, minus the mean agent run duration, and the runner's own per-case figure (fixtures, trace read,
   scoring, AgentService set-up).

    .venv/bin/python scripts/bench/bench_benchmarks.py [--repeat N] [--agent-repeat N]

Prints figures, asserts nothing. The embedder model loads once (first figure includes it, reported apart).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sidecar.benchmarks.models import AgentRunCreateParams, RagRunCreateParams
from sidecar.embeddings import default_embedder
from tests.support.bench_env import bench_environment


async def main(args: argparse.Namespace) -> None:
    t = time.perf_counter()
    await anyio.to_thread.run_sync(default_embedder().embed, ["warm up"])
    print(f"embedder load + first embed: {(time.perf_counter() - t) * 1000:.0f} ms (once per process)")
    with tempfile.TemporaryDirectory() as tmp:
        async with bench_environment(Path(tmp) / "data", Path(tmp) / "ws") as env:
            for rep in range(args.repeat):
                t = time.perf_counter()
                run = await env.bench.create_rag(RagRunCreateParams(dataset_id="rag-core-v1"))
                done = await env.bench.wait(run.run_id)
                wall = time.perf_counter() - t
                n = done.config_snapshot["dataset"]["selected_cases"]
                idx = done.config_snapshot["index"]
                print(
                    f"\nRAG rag-core-v1 run {rep + 1}: {n} cases x 3 modes in {wall:.2f} s (goal < 30 s); "
                    f"indexing {idx['notes']} notes / {idx['blocks']} blocks: {idx['indexing_ms']:.0f} ms"
                )
                for mode, m in (done.metrics or {}).items():
                    print(
                        f"  {mode:7s} hit@1 {m['hit_at_1']:.3f}  hit@5 {m['hit_at_5']:.3f}  recall@10 "
                        f"{m['recall_at_k']:.3f}  MRR {m['mrr']:.3f}  nDCG@10 {m['ndcg_at_10']:.3f}  citation "
                        f"{m['citation_hit_rate']:.3f}  p50 {m['p50_latency_ms']:.1f} ms  "
                        f"p95 {m['p95_latency_ms']:.1f} ms"
                    )
            t = time.perf_counter()
            run = await env.bench.create_agent(
                AgentRunCreateParams(dataset_id="agent-core-v1", repeat=args.agent_repeat)
            )
            done = await env.bench.wait(run.run_id)
            wall = (time.perf_counter() - t) * 1000
            m = done.metrics or {}
            cases = m["case_count"]
            print(
                f"\nagent agent-core-v1: {cases} case runs in {wall:.0f} ms; "
                f"mean agent run {m['average_latency_ms']:.1f} ms"
            )
            print(
                f"  benchmark overhead per case: {wall / cases - m['average_latency_ms']:.1f} ms (wall/cases - run); "
                f"runner's own figure {m['overhead_ms_per_case']:.1f} ms (goal < 50 ms)"
            )
            print(
                f"  task success {m['task_success_rate']:.3f}  tool selection {m['tool_selection_accuracy']:.3f}  "
                f"arguments {m['tool_argument_accuracy']:.3f}  invalid calls {m['invalid_tool_call_rate']:.3f}  "
                f"steps {m['average_steps']:.2f}  tokens {m['average_token_usage']:.0f}  pass^k {m['pass_hat_k']}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=2, help="RAG runs (the first includes LanceDB warm-up)")
    parser.add_argument("--agent-repeat", type=int, default=3, help="agent: repeat (pass^k)")
    anyio.run(main, parser.parse_args())
