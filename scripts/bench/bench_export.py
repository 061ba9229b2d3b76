#!/usr/bin/env python3
"""Export speed: a generated ~50-page bilingual document (10 Mermaid diagrams, 5 function plots, tables, code,
inline and block maths, footnotes) → HTML, PDF and DOCX through the ExportService (jobs, files and all), after
warm-up, as pages/s; and the same Markdown through Debian's ``pandoc`` (HTML and DOCX; comparison only, skipped if
pandoc is not installed) as a time ratio in the same run.

    .venv/bin/python scripts/bench/bench_export.py [--rounds 3] [--sections 47]

* pages: the page count of our own A4 PDF of the document (the same number is used for every format);
* warm-up: one export per format first (browser launch, Mermaid bundle, Python imports);
* ``fresh``: every round changes each diagram/plot/formula a little, so the render cache never hits (the cost of
  a first export of a new document on a warm sidecar); ``cached``: the same document again (a re-export);
* pandoc: ``pandoc -f markdown -t html5 --standalone`` / ``-t docx``: it draws no diagrams and writes maths as
  MathML/OMML, so it does less work for the diagrams; ratio = ours / pandoc (≤ 1 is the goal).
Figures are wall-clock on whatever machine runs this (a shared 2-core machine in CI: expect noise).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from sidecar.core.settings import Settings  # noqa: E402
from sidecar.export.models import ExportCreateParams  # noqa: E402
from sidecar.export.pdf import count_pages  # noqa: E402
from sidecar.export.service import ExportService  # noqa: E402
from sidecar.export.worker import ExportWorker  # noqa: E402
from sidecar.jobs import JobManager  # noqa: E402
from sidecar.storage.sqlite import Database  # noqa: E402
from sidecar.themes.service import ThemeService  # noqa: E402
from sidecar.trace.eventlog import EventLog  # noqa: E402
from sidecar.wiring import open_render  # noqa: E402
from sidecar.workers.supervisor import ChildSupervisor  # noqa: E402

MERMAID = [
    "flowchart TD\n  A[就绪 Ready {r}] --> B[运行 Running]\n  B --> C[阻塞 Blocked]\n  C --> A",
    "sequenceDiagram\n  participant 用户\n  participant 内核\n  用户->>内核: 系统调用 {r}\n  内核-->>用户: 返回",
    "classDiagram\n  class 进程{{\n    +int pid\n    +run() {r}\n  }}\n  进程 <|-- 线程",
    "stateDiagram-v2\n  [*] --> 新建\n  新建 --> 就绪: 创建 {r}\n  就绪 --> 运行\n  运行 --> [*]",
    "flowchart LR\n  请求 --> 缓存{{命中? {r}}}\n  缓存 -->|是| 返回\n  缓存 -->|否| 数据库 --> 返回",
]
PLOTS = ["sin(x*{k})", "x^2/{k}", "cos(x)*{k}/3", "exp(-x^2/{k})", "tan(x)/{k}"]


def generate(sections: int, r: int, diagrams: bool = True) -> str:
    """~1.25 A4 pages per section; 10 diagrams and 5 plots spread over the document."""
    out = [f"# 操作系统教程 Operating Systems Handbook {r}\n"]
    diagram_at = {round(i * sections / 10) for i in range(10)}
    plot_at = {round(i * sections / 5) + 1 for i in range(5)}
    d = p = 0
    for s in range(sections):
        out.append(f"## 第 {s + 1} 章 Chapter {s + 1}: 进程与线程 Processes\n")
        out.append(
            "操作系统负责管理硬件资源，并为应用程序提供统一的抽象。进程是资源分配的基本单位，线程是调度的基本单位。"
            f"An operating system manages hardware and offers abstractions; a process owns resources, a thread is "
            f"scheduled. 时间片轮转 (round robin) gives each of $n$ processes a slice $q$, so the wait is at most "
            f"$(n-1)q$.[^f{s}] Section {s} of round {r}.\n"
        )
        out.append(
            "- 调度算法 Scheduling\n  - 先来先服务 FCFS\n  - 短作业优先 SJF\n    1. 非抢占 non-preemptive\n"
            "    2. 抢占 preemptive\n- 同步 Synchronisation\n"
        )
        out.append(
            "| 算法 | 平均等待 ms | 抢占 |\n|:---|---:|:---:|\n"
            + "".join(
                f"| {name} | {10.0 / (i + 1) + s:.1f} | {'是' if i % 2 else '否'} |\n"
                for i, name in enumerate(["FCFS", "SJF", "RR", "MLFQ", "EDF"])
            )
        )
        out.append(
            f"```python\ndef schedule_{s}(queue):\n    # 按剩余时间排序 sort by remaining burst\n"
            f"    return sorted(queue, key=lambda p: p.burst + {s})\n```\n"
        )
        out.append(f"$$\n\\bar{{W}}_{{{s}}} = \\frac{{1}}{{n}}\\sum_{{i=1}}^{{n}} w_i + {r}\n$$\n")
        out.append("> 提示 Tip: 死锁的四个必要条件 — mutual exclusion, hold and wait, no preemption, circular wait.\n")
        if diagrams and s in diagram_at and d < 10:
            out.append("```mermaid\n" + MERMAID[d % len(MERMAID)].format(r=f"{r}.{d}") + "\n```\n")
            d += 1
        if diagrams and s in plot_at and p < 5:
            expr = PLOTS[p].format(k=p + 2 + r)
            out.append(
                f"```function_plot\nexpressions:\n  - expression: {expr}\n    label: 曲线 {p}\n"
                "domain: [-5, 5]\nrange: [-3, 3]\n```\n"
            )
            p += 1
        out.append(f"[^f{s}]: 参见第 {s + 1} 章的习题 — see the exercises of chapter {s + 1}.\n")
    return "\n".join(out)


async def _export(svc: ExportService, md: str, fmt: str) -> tuple[float, bytes, list[str]]:
    t0 = time.perf_counter()
    job = await svc.create(ExportCreateParams(source={"type": "markdown", "markdown": md}, format=fmt))
    job = await svc.wait(job.job_id)
    elapsed = time.perf_counter() - t0
    if job.status != "completed" or job.file is None:
        raise SystemExit(f"{fmt} export {job.status}: {job.error}")
    data = (svc.root / f"{job.job_id}.{fmt}").read_bytes()
    return elapsed, data, job.warnings


def _pandoc(md: str, fmt: str, rounds: int) -> float | None:
    exe = shutil.which("pandoc")
    if exe is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "doc.md"
        src.write_text(md, encoding="utf-8")
        args = {"html": ["-t", "html5", "--standalone", "--mathml"], "docx": ["-t", "docx"]}[fmt]
        times = []
        for i in range(rounds + 1):
            t0 = time.perf_counter()
            subprocess.run(
                [exe, "-f", "markdown", *args, "-o", str(Path(tmp) / f"out.{fmt}"), str(src)],
                check=True,
                capture_output=True,
            )
            if i:  # the first run warms the page cache
                times.append(time.perf_counter() - t0)
    return statistics.median(times)


async def main(rounds: int, sections: int) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="metona-bench-export-"))
    try:
        db = await Database.open(work)
        log = EventLog(db)
        await log.migrate()
        async with anyio.create_task_group() as tg:
            jobs = JobManager(db, log, tg)
            children = ChildSupervisor()
            render = open_render(Settings(data_dir=work), children, tg)
            themes = ThemeService(work, "1.0.0")
            worker = ExportWorker(children, tg)
            svc = ExportService(work, jobs, render=render, knowledge=None, themes=themes, worker=worker)
            await svc.start()
            warm_md = generate(sections, 0)
            _, pdf, warnings = await _export(svc, warm_md, "pdf")
            pages = count_pages(pdf)
            for fmt in ("html", "docx"):
                await _export(svc, warm_md, fmt)
            figures: dict[str, object] = {
                "pages": pages,
                "sections": sections,
                "rounds": rounds,
                "warnings": len(warnings),
            }
            for fmt in ("html", "pdf", "docx"):
                fresh = [(await _export(svc, generate(sections, 100 + i), fmt))[0] for i in range(rounds)]
                cached = [(await _export(svc, warm_md, fmt))[0] for _ in range(rounds)]
                f_med, c_med = statistics.median(fresh), statistics.median(cached)
                entry: dict[str, object] = {
                    "fresh_s": round(f_med, 3),
                    "fresh_pages_per_s": round(pages / f_med, 1),
                    "cached_s": round(c_med, 3),
                    "cached_pages_per_s": round(pages / c_med, 1),
                }
                if fmt in ("html", "docx"):
                    pt = _pandoc(warm_md, fmt, rounds)
                    entry["pandoc_s"] = None if pt is None else round(pt, 3)
                    entry["ratio_fresh_vs_pandoc"] = None if pt is None else round(f_med / pt, 2)
                    entry["ratio_cached_vs_pandoc"] = None if pt is None else round(c_med / pt, 2)
                    # the same job as pandoc: the document without diagrams and plots (pandoc draws none)
                    plain = generate(sections, 0, diagrams=False)
                    ours = statistics.median([(await _export(svc, plain, fmt))[0] for _ in range(rounds)])
                    pp = _pandoc(plain, fmt, rounds)
                    entry["no_diagrams_s"] = round(ours, 3)
                    entry["no_diagrams_pandoc_s"] = None if pp is None else round(pp, 3)
                    entry["ratio_no_diagrams_vs_pandoc"] = None if pp is None else round(ours / pp, 2)
                figures[fmt] = entry
            await jobs.shutdown(2)
            await render.close()
            await worker.aclose()
            await children.stop_all(0.5)
            tg.cancel_scope.cancel()
        await db.close()
        return figures
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sections", type=int, default=47)  # ≈ 50 A4 pages
    ns = ap.parse_args()
    result = anyio.run(main, ns.rounds, ns.sections)
    goals = {"html": 20, "pdf": 5, "docx": 10}
    print(f"document: {result['pages']} A4 pages ({result['sections']} sections), rounds {result['rounds']}")
    for fmt in ("html", "pdf", "docx"):
        e = result[fmt]
        assert isinstance(e, dict)
        line = (
            f"{fmt:5s} fresh {e['fresh_s']:7.3f} s = {e['fresh_pages_per_s']:6.1f} pages/s | cached "
            f"{e['cached_s']:7.3f} s = {e['cached_pages_per_s']:6.1f} pages/s | goal >= {goals[fmt]} pages/s"
        )
        if "pandoc_s" in e:
            line += (
                f" | pandoc {e['pandoc_s']} s, ratio fresh {e['ratio_fresh_vs_pandoc']} cached "
                f"{e['ratio_cached_vs_pandoc']}"
                if e["pandoc_s"] is not None
                else " | pandoc: not installed"
            )
        print(line)
        if "no_diagrams_s" in e:  # the same job as pandoc: the document without diagrams and plots
            nd = e["no_diagrams_s"]
            print(
                f"{fmt:5s} without diagrams {nd:7.3f} s = {result['pages'] / nd:6.1f} pages/s"
                + (
                    f" | pandoc {e['no_diagrams_pandoc_s']} s, ratio {e['ratio_no_diagrams_vs_pandoc']} (goal <= 1)"
                    if e["no_diagrams_pandoc_s"] is not None
                    else " | pandoc: not installed"
                )
            )
    print(json.dumps(result, ensure_ascii=False))
