"""``metona-sidecar bench rag|agent --dataset ID [...]``: run a benchmark through the same services the sidecar
serves (built by :func:`sidecar.wiring.open_headless`), with a progress bar on stderr, then write
``<run_id>.json`` (the §9.7 report) and ``<run_id>.html`` to ``-o DIR`` and print the summary table on stdout.

This is a human command, not the stdio server: stdout carries the table only. Exit code 0 when the run completed,
1 when it failed or was cancelled (Ctrl-C cancels it and still writes the partial report), 2 for bad options.
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

from sidecar.core.errors import SidecarError

from .output import bar, start_cli, write_error


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="metona-sidecar bench", description="Run a RAG or agent benchmark.")
    p.add_argument("kind", choices=["rag", "agent"])
    p.add_argument("--dataset", required=True, help="dataset id (see benchmarks/datasets/list)")
    p.add_argument("--modes", default="fts,vector,hybrid", help="rag: comma-separated search modes")
    p.add_argument("--provider", default="mock", help="agent: provider id (default: the scripted mock)")
    p.add_argument("--model", default=None, help="agent: model (default: the provider's)")
    p.add_argument("--repeat", type=int, default=1, help="run every case N times (spread; agent: pass^k)")
    p.add_argument("--concurrency", type=int, default=1, help="agent: cases at once")
    p.add_argument("--cases", default=None, help="comma-separated case ids (default: all)")
    p.add_argument("--top-k", type=int, default=None, help="rag: k of recall@k")
    p.add_argument("--compare", default=None, help="a previous run id to diff against in the HTML report")
    p.add_argument("-o", "--output", type=Path, default=Path("bench-reports"), help="folder for the reports")
    p.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="data directory for the run records and traces (default: <output>/data; never the data dir of a "
        "sidecar that is running: its job recovery would fail that sidecar's running jobs)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def _params(ns: argparse.Namespace) -> dict[str, Any]:
    params: dict[str, Any] = {"dataset_id": ns.dataset, "repeat": ns.repeat}
    if ns.cases:
        params["case_ids"] = [c for c in ns.cases.split(",") if c]
    if ns.kind == "rag":
        params["modes"] = [m for m in ns.modes.split(",") if m]
        if ns.top_k is not None:
            params["retrieval"] = {"top_k": ns.top_k}
    else:
        params.update(provider_id=ns.provider, concurrency=ns.concurrency)
        if ns.model:
            params["model"] = ns.model
    return params


def _bar(progress: Any, width: int = 30) -> str:
    if progress is None:
        return ""
    return bar(progress.percent or 0.0, f"{progress.phase}: {progress.message or ''}", width)[:120]


def _step(progress: Any) -> str:
    """Without a terminal: one line per 10 % of a phase."""
    if progress is None:
        return ""
    return f"{progress.phase} {int((progress.percent or 0.0) // 10) * 10}%\n"


def table(headers: list[str], rows: list[list[Any]]) -> str:
    from sidecar.benchmarks.report import format_cell

    cells = [[str(h) for h in headers]] + [[format_cell(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"


async def ensure_provider(providers: Any, provider_id: str, err: Any) -> None:
    """A preset id that needs no API key (``local``, ``ollama``, …) names a provider even on a fresh data dir: it
    is created from the preset under that id the first time. Anything else must be configured (the run's own
    check answers for it)."""
    from sidecar.core.errors import NotFoundError
    from sidecar.providers.presets import PRESETS

    preset = PRESETS.get(provider_id)
    if provider_id == "mock" or preset is None or preset.requires_api_key:
        return
    try:
        await providers.get(provider_id)
    except NotFoundError:
        await providers.create(preset=provider_id, provider_id=provider_id)
        err.write(f"provider {provider_id!r} created from its preset\n")


async def _run(ns: argparse.Namespace, settings: Any) -> int:
    from sidecar.benchmarks.models import AgentRunCreateParams, RagRunCreateParams
    from sidecar.benchmarks.report import render_html, summary_rows, tag_rows
    from sidecar.wiring import open_headless, shutdown_hooks

    err = sys.stderr
    async with AsyncExitStack() as stack:
        tg = await stack.enter_async_context(anyio.create_task_group())
        services = await open_headless(settings, stack, tg)
        bench = services.benchmarks
        try:
            if ns.kind == "agent":
                await ensure_provider(services.providers, ns.provider, err)
            if ns.kind == "rag":
                run = await bench.create_rag(RagRunCreateParams.model_validate(_params(ns)))
            else:
                run = await bench.create_agent(AgentRunCreateParams.model_validate(_params(ns)))
        except SidecarError as exc:
            write_error(err, exc)
            tg.cancel_scope.cancel()
            return 2
        err.write(f"run {run.run_id} ({ns.kind}, dataset {ns.dataset}, hash {run.dataset_hash})\n")
        try:
            shown = ""
            tty = err.isatty()
            with services.events.listen(run.run_id, buffer=100_000) as listener:
                while True:
                    current = await bench.get(run.run_id)
                    line = _bar(current.progress) if tty else _step(current.progress)
                    if not ns.quiet and line != shown:
                        err.write(line)
                        err.flush()
                        shown = line
                    if current.status in ("completed", "failed", "cancelled"):
                        break
                    with anyio.move_on_after(1):
                        await listener.receive()
        except (KeyboardInterrupt, anyio.get_cancelled_exc_class()):
            with anyio.CancelScope(shield=True):
                await bench.cancel(run.run_id)
                await bench.wait(run.run_id)
        except anyio.EndOfStream:
            pass
        with anyio.CancelScope(shield=True):
            final = await bench.wait(run.run_id)
            report = await bench.report(run.run_id, ns.compare)
        err.write("\n")
        out: Path = ns.output
        page = await anyio.to_thread.run_sync(render_html, report)
        await anyio.Path(out).mkdir(parents=True, exist_ok=True)
        await anyio.Path(out / f"{run.run_id}.json").write_text(report.model_dump_json(indent=2), encoding="utf-8")
        await anyio.Path(out / f"{run.run_id}.html").write_text(page, encoding="utf-8")
        headers, rows = summary_rows(report)
        sys.stdout.write(table(headers, rows))
        if report.by_tag:
            sys.stdout.write("\n" + table(*tag_rows(report)))
        sys.stdout.write(f"\nstatus {final.status}; {len(report.failures)} failed case(s) of {len(report.cases)}\n")
        for f in report.failures[:20]:
            sys.stdout.write(f"  {f.case_id} {f.mode or ''} {f.status}: {f.failure_reason}\n")
        sys.stdout.write(f"reports: {out / (run.run_id + '.json')}  {out / (run.run_id + '.html')}\n")
        if final.error is not None:
            err.write(f"run error: {final.error.code}: {final.error.message}\n")
        for hook in shutdown_hooks(services, settings):
            await hook()
        tg.cancel_scope.cancel()
        return 0 if final.status == "completed" else 1


def main(argv: list[str]) -> int:
    start_cli()
    ns = _parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sidecar.core.settings import Settings

    data_dir: Path = ns.data_dir or ns.output / "data"
    key = os.environ.get("METONA_SECRET_KEY_FILE")
    settings = Settings(
        data_dir=data_dir.expanduser().resolve(),
        secret_key_file=Path(key).expanduser().resolve() if key else None,
    )
    try:
        return anyio.run(_run, ns, settings)
    except KeyboardInterrupt:
        return 1
