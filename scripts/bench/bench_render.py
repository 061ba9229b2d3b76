#!/usr/bin/env python3
"""Static rendering speed: Mermaid cold and warm per diagram, diagrams/s with the warm pool, function plots/s,
and the same diagrams through ``mmdc`` (npm @mermaid-js/mermaid-cli, comparison only, same Chromium) as a ratio.

    .venv/bin/python scripts/bench/bench_render.py [--rounds 5] [--no-mmdc]

* cold: a fresh BrowserPool (Playwright driver + Chromium launch + bundle load) and the first diagram;
* warm: each diagram again on the warm pool, cache bypassed (every source is made unique), median per diagram;
* pool: all diagrams × rounds submitted concurrently to the warm pool (2 pages) → diagrams/s;
* plots: the render/static function_plot path without the cache (parse + sample + SVG + sanitise), median;
* mmdc: one `mmdc -i x.mmd -o x.svg` per diagram (what mermaid-cli users run: a cold browser per diagram),
  installed on first use in tools/bench-mmdc with PUPPETEER_SKIP_DOWNLOAD=1 and run with /usr/bin/chromium.
Figures are wall-clock on whatever machine runs this (a shared 2-core machine in CI: expect noise).
"""

from __future__ import annotations

import argparse
import json
import os
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

from sidecar.core.settings import parse_args  # noqa: E402
from sidecar.render.browser import BrowserPool  # noqa: E402
from sidecar.render.mermaid import MermaidRenderer  # noqa: E402
from sidecar.render.renderers import FunctionPlotRenderer  # noqa: E402
from sidecar.render.service import RenderService  # noqa: E402
from sidecar.system.capabilities import find_chromium  # noqa: E402

DIAGRAMS = {
    "flowchart": "flowchart TD\n  A[开始] --> B{是否登录}\n  B -->|是| C[进入首页]\n  B -->|否| D[登录页面]\n  D --> B",
    "sequence": "sequenceDiagram\n  participant 用户\n  participant 服务器\n  用户->>服务器: 发送请求\n"
    "  服务器-->>用户: 返回结果\n  Note over 用户,服务器: 中文注释",
    "class": "classDiagram\n  class Animal {\n    +String name\n    +eat()\n  }\n"
    "  Animal <|-- Duck\n  Animal <|-- Fish",
    "state": "stateDiagram-v2\n  [*] --> 待办\n  待办 --> 进行中\n  进行中 --> 完成\n  完成 --> [*]",
    "gantt": "gantt\n  title 计划\n  dateFormat YYYY-MM-DD\n  section 阶段一\n  设计 :a1, 2026-01-01, 7d\n"
    "  开发 :after a1, 14d",
}
PLOT = (
    "expressions:\n  - sin(x)\n  - x^2/4\n  - tan(x)\ndomain: [-6, 6]\nrange: [-4, 4]\naxes: {xLabel: x, yLabel: y}\n"
)
MMDC_DIR = ROOT / "tools" / "bench-mmdc"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f} ms"


async def mermaid_figures(rounds: int, data_dir: Path) -> dict[str, float]:
    chromium = find_chromium(parse_args([]))
    out: dict[str, float] = {}
    t0 = time.perf_counter()
    pool = BrowserPool(chromium)
    svc = RenderService(data_dir, pool, [MermaidRenderer(pool)])
    try:
        await svc.render_source("mermaid", DIAGRAMS["flowchart"])
        out["cold"] = time.perf_counter() - t0
        per: dict[str, list[float]] = {name: [] for name in DIAGRAMS}
        for r in range(rounds):
            for name, source in DIAGRAMS.items():
                t = time.perf_counter()
                await svc.render_source("mermaid", f"{source}\n%% warm {r}")
                per[name].append(time.perf_counter() - t)
        for name, times in per.items():
            out[f"warm:{name}"] = statistics.median(times)
        out["warm"] = statistics.median([t for times in per.values() for t in times])
        n = rounds * len(DIAGRAMS)
        t = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for i in range(n):
                name = list(DIAGRAMS)[i % len(DIAGRAMS)]
                tg.start_soon(svc.render_source, "mermaid", f"{DIAGRAMS[name]}\n%% pool {i}")
        out["pool_per_s"] = n / (time.perf_counter() - t)
        t = time.perf_counter()
        await svc.render_source("mermaid", DIAGRAMS["flowchart"])
        out["cached"] = time.perf_counter() - t
    finally:
        await svc.close()
    return out


async def plot_figures(rounds: int, data_dir: Path) -> dict[str, float]:
    svc = RenderService(data_dir, BrowserPool(None), [FunctionPlotRenderer()])
    times = []
    for r in range(max(rounds * 10, 20)):
        t = time.perf_counter()
        await svc.render_source("function_plot", f"{PLOT}# {r}\n")
        times.append(time.perf_counter() - t)
    return {"plot": statistics.median(times), "plots_per_s": 1 / statistics.median(times)}


def mmdc_figures(chromium: str) -> dict[str, float] | None:
    mmdc = MMDC_DIR / "node_modules" / ".bin" / "mmdc"
    if not mmdc.exists():
        if not shutil.which("npm"):
            return None
        env = {**os.environ, "PUPPETEER_SKIP_DOWNLOAD": "1"}
        subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
            cwd=MMDC_DIR,
            env=env,
            check=True,
            stdout=sys.stderr,
        )
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp, "puppeteer.json")
        config.write_text(
            json.dumps(
                {
                    "executablePath": chromium,
                    "args": [
                        "--no-sandbox",
                        "--disable-gpu",
                        "--disable-background-networking",
                        "--disable-component-update",
                    ],
                }
            )
        )
        for name, source in DIAGRAMS.items():
            src, dst = Path(tmp, f"{name}.mmd"), Path(tmp, f"{name}.svg")
            src.write_text(source)
            t = time.perf_counter()
            subprocess.run(
                [str(mmdc), "-q", "-p", str(config), "-i", str(src), "-o", str(dst)],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=120,
            )
            out[name] = time.perf_counter() - t
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-mmdc", action="store_true")
    ns = parser.parse_args()
    chromium = find_chromium(parse_args([]))
    with tempfile.TemporaryDirectory() as tmp:
        mermaid = anyio.run(mermaid_figures, ns.rounds, Path(tmp, "m"))
        plots = anyio.run(plot_figures, ns.rounds, Path(tmp, "p"))
    print("static rendering (shared machine: expect noise)")
    print(f"  mermaid cold (driver + Chromium + bundle + 1st diagram) {_ms(mermaid['cold'])}")
    for name in DIAGRAMS:
        print(f"  mermaid warm {name:<10} (median of {ns.rounds})          {_ms(mermaid[f'warm:{name}'])}")
    print(f"  mermaid warm, all diagrams (median)                  {_ms(mermaid['warm'])}   goal <= 150 ms")
    print(f"  mermaid warm pool (2 pages, concurrent)             {mermaid['pool_per_s']:8.1f} diagrams/s")
    print(f"  mermaid served from the cache                       {_ms(mermaid['cached'])}")
    print(
        f"  function plot (3 curves, parse+sample+SVG+sanitise) {_ms(plots['plot'])}   goal <= 20 ms"
        f"  ({plots['plots_per_s']:.0f} plots/s)"
    )
    if ns.no_mmdc or not chromium:
        return
    mmdc = mmdc_figures(chromium)
    if mmdc is None:
        print("  mmdc: npm not found, comparison skipped")
        return
    for name, seconds in mmdc.items():
        ratio = seconds / mermaid[f"warm:{name}"]
        print(
            f"  mmdc {name:<10} (cold browser per diagram)          {_ms(seconds)}   warm pool is {ratio:5.1f}x faster"
        )
    ratio = statistics.median(mmdc.values()) / mermaid["warm"]
    print(f"  mmdc median per diagram / warm median               {ratio:8.1f}x   goal >= 5x")


if __name__ == "__main__":
    main()
