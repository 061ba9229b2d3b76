"""The HTML report, opened in Chromium: the plots are there (SVG drawn by matplotlib), nothing is fetched."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from sidecar.benchmarks.models import AgentRunCreateParams, RagRunCreateParams
from sidecar.benchmarks.report import render_html, tag_rows
from tests.support.bench_env import BenchEnv

pytestmark = pytest.mark.anyio

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SUBSET = ["rag-zh-001", "rag-zh-002", "rag-en-001", "rag-en-002", "rag-x-001", "rag-x-002"]


def _open(page_path: Path, shot: Path) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(java_script_enabled=False, viewport={"width": 1100, "height": 900})
            page.on("request", lambda r: requests.append(r.url))
            page.goto(page_path.as_uri())
            plots = {
                el.get_attribute("data-plot"): {
                    "svg": el.locator("svg").count(),
                    "bars": el.locator('[id^="bar-"]').count(),
                    "box": el.locator("svg").first.bounding_box(),
                }
                for el in page.locator("figure.plot").all()
            }
            page.screenshot(path=str(shot), full_page=True)
            text = page.inner_text("body")
        finally:
            browser.close()
    return {"plots": plots, "requests": requests, "text": text}


async def test_html_report_shows_its_plots_in_chromium(env: BenchEnv, tmp_path: Path) -> None:
    params = {"dataset_id": "rag-core-v1", "case_ids": SUBSET}
    first = await env.bench.wait((await env.bench.create_rag(RagRunCreateParams.model_validate(params))).run_id)
    params["retrieval"] = {"rerank": False, "rrf_k": 5}
    second = await env.bench.wait((await env.bench.create_rag(RagRunCreateParams.model_validate(params))).run_id)
    report = await env.bench.report(second.run_id, compare_to=first.run_id)
    html = await anyio.to_thread.run_sync(render_html, report)
    assert "<script" not in html and not re.search(r'(src|href)="(https?:)?//', html)
    path = tmp_path / "report.html"
    path.write_text(html, encoding="utf-8")
    shot = tmp_path / "report.png"
    seen = await anyio.to_thread.run_sync(_open, path, shot)
    assert set(seen["plots"]) == {"metrics", "latency", "tags", "diff"}
    for name, plot in seen["plots"].items():
        assert plot["svg"] == 1 and plot["box"]["width"] > 300 and plot["box"]["height"] > 100, name
    assert seen["plots"]["metrics"]["bars"] >= 3 * 6, "a bar per mode and metric"
    assert seen["requests"] == [path.as_uri()], "nothing but the file itself is loaded"
    assert "Failures" in seen["text"] and "Configuration snapshot" in seen["text"]
    assert shot.stat().st_size > 20_000


async def test_agent_report_html(env: BenchEnv) -> None:
    p = AgentRunCreateParams(dataset_id="agent-core-v1", case_ids=["agent-calc-001", "agent-irr-006"])
    done = await env.bench.wait((await env.bench.create_agent(p)).run_id)
    report = await env.bench.report(done.run_id)
    html = await anyio.to_thread.run_sync(render_html, report)
    for name in ("metrics", "latency", "tags"):
        assert f'data-plot="{name}"><svg' in html
    assert "agent-irr-006" in html and report.failures[0].trace_run_id in html
    headers, rows = tag_rows(report)
    assert headers[0] == "tag" and "task_success_rate" in headers and headers[-1] == "p50_latency_ms"
    by_tag = {row[0]: dict(zip(headers, row, strict=True)) for row in rows}
    assert by_tag["calculator"]["task_success_rate"] == 1.0 and by_tag["over-calling"]["task_success_rate"] == 0.0
    assert by_tag["en"]["case_count"] == 1 and by_tag["zh"]["case_count"] == 1
    assert '<table class="tags">' in html and ">over-calling</td>" in html
