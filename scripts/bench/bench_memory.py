#!/usr/bin/env python3
"""Memory store latency with the default embedder (USE multilingual v3): add and search p50/p95 at N memories.

    .venv/bin/python scripts/bench/bench_memory.py [--sizes 1000 5000] [--ops 50] [--embedder use|hash]

For each size, the store is filled in bulk (batched embedding, one commit per batch, then one optimize), then
``--ops`` calls of ``MemoryService.add`` (auto-supersession on: 1-2 k-NN probes + one commit) and
``MemoryService.search`` (query embedding + exact k-NN + ranking) are timed, interleaved. Prints a table.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from sidecar.embeddings import Embedder, HashEmbedder, default_embedder  # noqa: E402
from sidecar.memory.models import MemoryAddParams, MemorySearchParams  # noqa: E402
from sidecar.memory.service import MemoryService  # noqa: E402

SUBJECTS_ZH = ["项目", "会议", "客户", "服务器", "数据库", "预算", "报告", "团队", "合同", "版本"]
SUBJECTS_EN = ["project", "meeting", "customer", "server", "database", "budget", "report", "team", "contract"]
FACTS_ZH = ["定在周{}下午", "负责人是第{}组", "预计{}天完成", "位于{}号楼", "需要{}个人审批"]
FACTS_EN = ["is due on day {}", "is owned by team {}", "needs {} approvals", "moved to room {}", "costs {} thousand"]


def sentence(rng: random.Random) -> str:
    n = rng.randint(1, 9)
    if rng.random() < 0.5:
        return f"{rng.choice(SUBJECTS_ZH)}{rng.randint(1, 500)}{rng.choice(FACTS_ZH).format(n)}"
    return f"The {rng.choice(SUBJECTS_EN)} {rng.randint(1, 500)} {rng.choice(FACTS_EN).format(n)}"


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p * (len(xs) - 1)))] * 1000


async def bench(size: int, ops: int, embedder: Embedder) -> tuple[float, float, float, float, float]:
    rng = random.Random(size)
    with tempfile.TemporaryDirectory(prefix="metona-bench-memory-") as tmp:
        svc = MemoryService(Path(tmp), embedder)
        table = await svc._open()  # bulk fill below the service: the bench measures queries, not the fill
        info = embedder.info
        key = f"{info.model_id}@{info.model_version}"
        t0 = time.perf_counter()
        for start in range(0, size, 500):
            texts = [sentence(rng) for _ in range(min(500, size - start))]
            vectors = await anyio.to_thread.run_sync(embedder.embed, texts)
            rows = [
                {
                    "id": f"mem_bulk_{start + i}",
                    "type": rng.choice(["episodic", "semantic"]),
                    "content": text,
                    "source": "imported",
                    "importance": rng.random(),
                    "created_at": 1_700_000_000_000 + start + i,
                    "supersedes": [],
                    "merged_from": [],
                    "embedding_model": key,
                    "vector": vec.tolist(),
                }
                for i, (text, vec) in enumerate(zip(texts, vectors, strict=True))
            ]
            await anyio.to_thread.run_sync(table.upsert, rows)
        await anyio.to_thread.run_sync(table.optimize)
        fill_s = time.perf_counter() - t0
        adds: list[float] = []
        searches: list[float] = []
        for _ in range(ops):
            t = time.perf_counter()
            await svc.add(MemoryAddParams(content=sentence(rng), type="semantic"))
            adds.append(time.perf_counter() - t)
            t = time.perf_counter()
            await svc.search(MemorySearchParams(query=sentence(rng), top_k=10))
            searches.append(time.perf_counter() - t)
        return fill_s, pct(adds, 0.5), pct(adds, 0.95), pct(searches, 0.5), pct(searches, 0.95)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--ops", type=int, default=50)
    parser.add_argument("--embedder", choices=["use", "hash"], default="use")
    args = parser.parse_args()
    embedder: Embedder = default_embedder() if args.embedder == "use" else HashEmbedder(dimension=512)
    embedder.embed(["warm up"])
    out = sys.stdout
    out.write(f"embedder {embedder.info.model_id} ({embedder.info.dimension}-d)\n")
    out.write(
        "| memories | fill s | add p50 ms | add p95 ms | search p50 ms | search p95 ms |\n|---|---|---|---|---|---|\n"
    )
    for size in args.sizes:
        fill_s, a50, a95, s50, s95 = await bench(size, args.ops, embedder)
        out.write(f"| {size} | {fill_s:.1f} | {a50:.1f} | {a95:.1f} | {s50:.1f} | {s95:.1f} |\n")
        out.flush()


if __name__ == "__main__":
    anyio.run(main)
