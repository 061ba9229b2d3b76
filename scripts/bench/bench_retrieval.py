#!/usr/bin/env python3
"""Retrieval benchmark: indexing throughput, query latency per mode at 10k/100k blocks, bilingual quality.

    python scripts/bench/bench_retrieval.py                 # everything (~3-4 min on 2 cores)
    python scripts/bench/bench_retrieval.py --sizes 10000   # skip the 100k corpus
    python scripts/bench/bench_retrieval.py --index-blocks 500 --queries 100

Everything goes through the production services (KnowledgeService → RetrievalService: SQLite records, LanceDB
tables, the in-process vector cache, RRF, the rerank stage); nothing is mocked except where said:

1. Indexing throughput with the default embedder (USE multilingual v3, 512-d): synthetic bilingual blocks
   written as notes of 100 blocks, each ``notes/create`` indexing its blocks before it returns. Model load is
   excluded (one warm-up call). Reported: blocks/s and the share of time spent embedding vs everything else
   (SQLite, LanceDB writes, FTS).
2. Query latency (p50/p95 per mode) at 10k and 100k blocks. To keep the run short these corpora use the
   hash-v1 embedder at 512-d (hashed n-grams: same vector size and index cost as USE, lexical neighbours
   instead of semantic ones; ~8k texts/s) and are built with the rebuild job's append path. The timed search
   includes the hash query embedding (~0.1 ms), not USE's; the USE single-query embedding latency is measured
   separately and printed so it can be added. At 100k the vector cache switches to its IVF layout (see
   sidecar/retrieval/vectors.py); its recall@20 against an exact scan is printed.
3. Quality on ``tests/retrieval/data/bilingual_quality.json`` (zh, en, paraphrase, cross-lingual queries)
   mixed into the section-1 corpus as distractors, with USE: hit@1, hit@5, MRR per mode.

The script prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from sidecar.embeddings import EmbedderInfo, HashEmbedder, default_embedder  # noqa: E402
from sidecar.jobs import JobManager  # noqa: E402
from sidecar.knowledge.models import BlockInput, CreateNoteParams  # noqa: E402
from sidecar.knowledge.service import KnowledgeService  # noqa: E402
from sidecar.retrieval.models import EmbedderConfig  # noqa: E402
from sidecar.retrieval.profile import get_profile  # noqa: E402
from sidecar.retrieval.service import RetrievalService  # noqa: E402
from sidecar.storage.lancedb import connect  # noqa: E402
from sidecar.storage.sqlite import Database  # noqa: E402
from sidecar.trace.eventlog import EventLog  # noqa: E402

QUALITY = ROOT / "tests" / "retrieval" / "data" / "bilingual_quality.json"

ZH_WORDS = (
    "项目 会议 进度 报告 预算 客户 合同 需求 设计 测试 上线 发布 版本 数据 分析 模型 训练 服务器 数据库 接口 "
    "缓存 日志 监控 告警 部署 迁移 备份 安全 权限 用户 登录 注册 支付 订单 库存 物流 营销 活动 推广 销售 收入 "
    "成本 利润 季度 年度 计划 目标 风险 问题 方案 讨论 决定 负责 完成 延期 评审 反馈 优化 性能 稳定 故障 修复 "
    "课程 学习 考试 作业 老师 学生 学校 图书馆 实验 论文 研究 算法 系统 网络 协议 操作 进程 线程 内存 磁盘 文件 "
    "旅行 航班 酒店 天气 城市 地铁 公园 医院 医生 健康 运动 跑步 饮食 咖啡 早餐 晚饭 周末 家庭 孩子 朋友 电影 音乐"
).split()
EN_WORDS = (
    "project meeting progress report budget customer contract requirement design test release version data "
    "analysis model training server database interface cache log monitoring alert deploy migration backup "
    "security permission user login payment order inventory shipping marketing campaign sales revenue cost "
    "profit quarter annual plan goal risk issue proposal discussion decision owner complete delay review "
    "feedback optimize performance stable outage fix course study exam homework teacher student school library "
    "experiment paper research algorithm system network protocol process thread memory disk file travel flight "
    "hotel weather city subway park hospital doctor health exercise running diet coffee breakfast dinner weekend "
    "family child friend movie music"
).split()


def synthetic_block(rng: random.Random) -> str:
    if rng.random() < 0.5:
        words = rng.choices(ZH_WORDS, k=rng.randint(8, 20))
        return "".join(w + ("，" if rng.random() < 0.2 else "") for w in words) + "。"
    words = rng.choices(EN_WORDS, k=rng.randint(10, 24))
    return " ".join(words).capitalize() + "."


def synthetic_query(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return "".join(rng.choices(ZH_WORDS, k=rng.randint(1, 3)))
    return " ".join(rng.choices(EN_WORDS, k=rng.randint(1, 3)))


class TimedEmbedder:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.texts = 0

    @property
    def info(self) -> EmbedderInfo:
        return self.inner.info

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        t = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - t
            self.texts += len(texts)


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))]


async def open_services(data_dir: Path, tg: Any, embedder: Any) -> tuple[Database, KnowledgeService, RetrievalService]:
    db = await Database.open(data_dir)
    jobs = JobManager(db, EventLog(db), tg)
    await jobs.migrate()
    knowledge = KnowledgeService(db, data_dir)
    await knowledge.migrate()
    retrieval = RetrievalService(
        db, data_dir, jobs=jobs, default_embedder=EmbedderConfig(kind="hash-v1"), embedder_factory=lambda c: embedder
    )
    await retrieval.start()
    return db, knowledge, retrieval


def raw_use_rates() -> None:
    """USE's own encode rate by BLAS thread count (the embedder seam's default is ``threads=2``)."""
    from sidecar.embeddings import UniversalSentenceEncoder

    rng = random.Random(3)
    texts = [synthetic_block(rng) for _ in range(256)]
    parts = []
    for threads in (1, 2):
        enc = UniversalSentenceEncoder(threads=threads)
        enc.embed(texts[:2])
        t = time.perf_counter()
        for i in range(0, len(texts), 64):
            enc.embed(texts[i : i + 64])
        parts.append(f"threads={threads}: {len(texts) / (time.perf_counter() - t):.0f} texts/s")
    print("USE encode alone, batches of 64: " + ", ".join(parts))


async def section_indexing(
    data_dir: Path, n_blocks: int, tg: Any
) -> tuple[KnowledgeService, RetrievalService, Database]:
    print(f"\n## 1. Indexing throughput, default embedder (USE multilingual v3), {n_blocks} blocks")
    raw_use_rates()
    timed = TimedEmbedder(default_embedder())
    t = time.perf_counter()
    timed.embed(["warm-up 预热"])
    print(f"model load + first call: {time.perf_counter() - t:.2f} s (excluded)")
    t = time.perf_counter()
    await anyio.to_thread.run_sync(connect, data_dir)
    print(f"lancedb import + connect: {time.perf_counter() - t:.2f} s (excluded)")
    timed.seconds, timed.texts = 0.0, 0
    db, knowledge, retrieval = await open_services(data_dir, tg, timed)
    knowledge.add_listener(retrieval.sync)
    rng = random.Random(7)
    texts = [synthetic_block(rng) for _ in range(n_blocks)]
    avg_chars = sum(len(x) for x in texts) / len(texts)
    t = time.perf_counter()
    for start in range(0, n_blocks, 100):
        chunk = texts[start : start + 100]
        await knowledge.create_note(
            CreateNoteParams(title=f"bench {start}", blocks=[BlockInput(text=x) for x in chunk])
        )
    total = time.perf_counter() - t
    other = total - timed.seconds
    print(
        f"blocks: {n_blocks} (avg {avg_chars:.0f} chars), notes of 100 blocks, each indexed before notes/create returns"
    )
    print(f"throughput: {n_blocks / total:.1f} blocks/s  ({total:.1f} s)")
    print(
        f"embedding: {timed.seconds:.1f} s ({timed.seconds / total:.0%}, {timed.texts / timed.seconds:.0f} texts/s)   "
        f"SQLite + LanceDB writes + FTS: {other:.1f} s ({other / total:.0%})"
    )
    return knowledge, retrieval, db


async def section_quality(knowledge: KnowledgeService, retrieval: RetrievalService, distractors: int) -> None:
    data = json.loads(QUALITY.read_text(encoding="utf-8"))
    print(f"\n## 3. Quality: {QUALITY.relative_to(ROOT)} ({len(data['queries'])} queries, {len(data['docs'])} docs)")
    print(f"   with {distractors} distractor blocks from section 1; embedder USE multilingual v3; top_k 10")
    note = await knowledge.create_note(
        CreateNoteParams(title="quality", blocks=[BlockInput(text=d["text"]) for d in data["docs"]])
    )
    doc_of = {b.block_id: data["docs"][i]["id"] for i, b in enumerate(note.blocks)}
    prof = get_profile()
    variants = [
        ("fts", "fts", prof),
        ("vector", "vector", prof),
        ("hybrid (RRF only)", "hybrid", prof.model_copy(update={"rerank": False})),
        ("hybrid + rerank (default-v2)", "hybrid", prof),
    ]
    print("\n| mode | hit@1 | hit@5 | MRR | p50 ms | zh hit@5 | en hit@5 | cross-lingual hit@5 |")
    print("|---|---|---|---|---|---|---|---|")
    for label, mode, p in variants:
        ranks: list[int | None] = []
        lat: list[float] = []
        groups: dict[str, list[bool]] = {"zh": [], "en": [], "cross": []}
        for q in data["queries"]:
            t = time.perf_counter()
            res = await retrieval.search(q["q"], mode, p, top_k=10)  # type: ignore[arg-type]
            lat.append((time.perf_counter() - t) * 1000)
            got = [doc_of.get(h.block_id) for h in res.items]
            rank = got.index(q["target"]) + 1 if q["target"] in got else None
            ranks.append(rank)
            group = "cross" if "->" in q["lang"] else ("zh" if q["lang"].startswith("zh") else "en")
            groups[group].append(rank is not None and rank <= 5)
        n = len(ranks)
        h1 = sum(1 for r in ranks if r == 1) / n
        h5 = sum(1 for r in ranks if r is not None and r <= 5) / n
        mrr = sum(1 / r for r in ranks if r) / n
        g = {k: sum(v) / len(v) for k, v in groups.items()}
        print(
            f"| {label} | {h1:.3f} | {h5:.3f} | {mrr:.3f} | {statistics.median(lat):.1f} | "
            f"{g['zh']:.3f} | {g['en']:.3f} | {g['cross']:.3f} |"
        )


async def section_latency(base: Path, sizes: list[int], n_queries: int, tg: Any) -> None:
    import os

    print("\n## 2. Query latency per mode (hash-v1 512-d vectors, see the docstring); profile default-v2, top_k 8")
    use = default_embedder()
    lat = []
    for i in range(50):
        t = time.perf_counter()
        use.embed([f"服务器为什么宕机 {i}"])
        lat.append((time.perf_counter() - t) * 1000)
    print(
        f"USE single-query embedding (add it to vector/hybrid with USE): "
        f"p50 {pct(lat, 50):.1f} ms, p95 {pct(lat, 95):.1f} ms"
    )
    rows = []
    for size in sizes:
        data_dir = base / f"latency-{size}"
        data_dir.mkdir()
        embedder = HashEmbedder(512)
        db, knowledge, retrieval = await open_services(data_dir, tg, embedder)
        rng = random.Random(size)
        t = time.perf_counter()
        for start in range(0, size, 2000):
            await knowledge.create_note(
                CreateNoteParams(
                    title=f"n{start}",
                    blocks=[BlockInput(text=synthetic_block(rng)) for _ in range(min(2000, size - start))],
                )
            )
        t_sql = time.perf_counter() - t
        t = time.perf_counter()
        job = await retrieval.rebuild("all")
        done = await retrieval._jobs.wait(job.job_id)  # type: ignore[union-attr]
        t_build = time.perf_counter() - t
        assert done.status.value == "completed", done.error
        print(
            f"{size} blocks: SQLite notes {t_sql:.1f} s; index build (rebuild job, fts + vectors, "
            f"{size / t_build:.0f} blocks/s) {t_build:.1f} s"
        )
        queries = [synthetic_query(rng) for _ in range(n_queries)]
        await retrieval.search(queries[0], "vector")  # loads the vector cache
        cache = retrieval._state.cache
        assert cache is not None
        t = time.perf_counter()
        await anyio.to_thread.run_sync(cache.wait_layout, 300.0)
        layout = f"IVF layout ({time.perf_counter() - t:.1f} s wait)" if cache.indexed else "exact scan"
        qvecs = embedder.embed(queries)
        recall = statistics.mean(
            len({h[0] for h in cache.search(v, 20)} & {h[0] for h in cache.search(v, 20, exact=True)}) / 20
            for v in qvecs
        )
        print(f"{size} blocks: vector search by {layout}; recall@20 vs exact scan {recall:.3f}")
        for mode in ("fts", "vector", "hybrid"):
            for q in queries[:10]:  # warm-up (caches, FTS index pages)
                await retrieval.search(q, mode)  # type: ignore[arg-type]
            lat = []
            hits = 0
            for q in queries:
                t = time.perf_counter()
                res = await retrieval.search(q, mode)  # type: ignore[arg-type]
                lat.append((time.perf_counter() - t) * 1000)
                hits += len(res.items)
            rows.append((size, mode, pct(lat, 50), pct(lat, 95), max(lat), hits / len(queries)))
        await db.close()
    print(f"(load average now {os.getloadavg()[0]:.2f}: other processes on the machine inflate these figures)")
    print(f"\n| blocks | mode | p50 ms | p95 ms | max ms | hits/query |  ({n_queries} queries, zh/en, 1-3 words)")
    print("|---|---|---|---|---|---|")
    for size, mode, p50, p95, mx, h in rows:
        print(f"| {size:,} | {mode} | {p50:.1f} | {p95:.1f} | {mx:.1f} | {h:.1f} |")


async def main(args: argparse.Namespace) -> None:
    import os

    print(f"cpus: {os.cpu_count()}, python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="bench-retrieval-", dir=args.data_dir) as tmp:
        base = Path(tmp)
        async with anyio.create_task_group() as tg:
            quality_dir = base / "quality"
            quality_dir.mkdir()
            knowledge, retrieval, db = await section_indexing(quality_dir, args.index_blocks, tg)
            if args.sizes:
                await section_latency(base, args.sizes, args.queries, tg)
            await section_quality(knowledge, retrieval, args.index_blocks)
            await db.close()
            tg.cancel_scope.cancel()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index-blocks", type=int, default=1000, help="blocks for section 1 (USE)")
    parser.add_argument(
        "--sizes",
        type=lambda s: [int(x) for x in s.split(",") if x],
        default=[10_000, 100_000],
        help="e.g. 10000,100000",
    )
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--data-dir", default=None, help="parent of the temporary data dirs (default: system temp)")
    anyio.run(main, parser.parse_args())
