"""The self-contained HTML report of a benchmark run: summary tables, failures with reasons, every case, and the
plots — metric bars with 95 % intervals, the latency distribution, per-tag breakdown and a diff against a previous
run — drawn by matplotlib (Agg, SVG inlined: no network, no script needed to read it).

matplotlib is imported here only (never on the sidecar's start-up path; the binary carries it too). Where it is
missing (an install without it), the report says so in place of each plot instead of drawing something by hand.
"""

from __future__ import annotations

import html
import io
import json
from typing import Any

from .metrics import AGENT_RATES, RAG_RATES
from .models import BenchmarkReport

MODE_COLORS = {"fts": "#4C78A8", "vector": "#F58518", "hybrid": "#54A24B"}
PLOT_NAMES = ("metrics", "latency", "tags", "diff")


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "svg.fonttype": "none",
            "svg.hashsalt": "metona-bench",
            "font.family": ["DejaVu Sans", "WenQuanYi Micro Hei", "sans-serif"],
            "font.size": 9,
        }
    )
    return plt


def _svg(fig: Any) -> str:
    """The figure as inline SVG (the figure is closed)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    _plt().close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]


def _series(report: BenchmarkReport) -> dict[str, dict[str, Any]]:
    """``{series: metrics}``: the modes of a rag run, the one agent series."""
    metrics = report.metrics or {}
    return dict(metrics) if report.run.kind == "rag" else ({"agent": metrics} if metrics else {})


def _rates(kind: str) -> tuple[str, ...]:
    return RAG_RATES if kind == "rag" else AGENT_RATES


def plot_metrics(report: BenchmarkReport) -> str:
    plt = _plt()
    series = _series(report)
    names = [n for n in _rates(report.run.kind) if any(s.get(n) is not None for s in series.values())]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    width = 0.8 / max(1, len(series))
    for i, (label, s) in enumerate(series.items()):
        xs = [j + i * width for j in range(len(names))]
        vals = [s.get(n) or 0.0 for n in names]
        lo = [max(0.0, v - s.get("ci95", {}).get(n, [v, v])[0]) for n, v in zip(names, vals, strict=True)]
        hi = [max(0.0, s.get("ci95", {}).get(n, [v, v])[1] - v) for n, v in zip(names, vals, strict=True)]
        ax.bar(xs, vals, width, label=label, color=MODE_COLORS.get(label), yerr=[lo, hi], capsize=3, gid=f"bar-{label}")
    ax.set_xticks([j + width * (len(series) - 1) / 2 for j in range(len(names))], names, rotation=15)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("score (95 % CI)")
    ax.set_title("Metrics per mode" if report.run.kind == "rag" else "Agent metrics")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return _svg(fig)


def plot_latency(report: BenchmarkReport) -> str:
    plt = _plt()
    groups: dict[str, list[float]] = {}
    for r in report.cases:
        if r.latency_ms is not None and r.status != "error":
            groups.setdefault(r.mode or "agent", []).append(r.latency_ms)
    fig, ax = plt.subplots(figsize=(8, 3))
    if groups:
        labels = list(groups)
        parts = ax.boxplot([groups[k] for k in labels], orientation="horizontal", patch_artist=True, showfliers=True)
        ax.set_yticks(range(1, len(labels) + 1), labels)
        for patch, label in zip(parts["boxes"], labels, strict=True):
            patch.set_facecolor(MODE_COLORS.get(label, "#9D755D"))
            patch.set_alpha(0.6)
    ax.set_xlabel("latency per case (ms)")
    ax.set_title("Latency distribution")
    ax.grid(axis="x", alpha=0.3)
    return _svg(fig)


def plot_tags(report: BenchmarkReport) -> str:
    plt = _plt()
    metric = "hit_at_5" if report.run.kind == "rag" else "task_success_rate"
    tags = sorted(report.by_tag)
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.28 * len(tags) + 1)))
    if report.run.kind == "rag":
        modes = sorted({m for t in tags for m in report.by_tag[t]})
        height = 0.8 / max(1, len(modes))
        for i, mode in enumerate(modes):
            vals = [(report.by_tag[t].get(mode) or {}).get(metric) or 0.0 for t in tags]
            ys = [j + i * height for j in range(len(tags))]
            ax.barh(ys, vals, height, label=mode, color=MODE_COLORS.get(mode))
        ax.set_yticks([j + height * (len(modes) - 1) / 2 for j in range(len(tags))], tags)
        ax.legend(loc="lower right", fontsize=8)
    else:
        ax.barh(range(len(tags)), [report.by_tag[t].get(metric) or 0.0 for t in tags], color="#4C78A8")
        ax.set_yticks(range(len(tags)), tags)
    ax.set_xlim(0, 1.05)
    ax.set_xlabel(metric)
    ax.set_title(f"{metric} per tag")
    ax.grid(axis="x", alpha=0.3)
    return _svg(fig)


def plot_diff(report: BenchmarkReport) -> str:
    plt = _plt()
    assert report.comparison is not None
    previous = report.comparison.get("metrics") or {}
    prev_series = dict(previous) if report.run.kind == "rag" else {"agent": previous}
    rows: list[tuple[str, float, float]] = []
    for label, s in _series(report).items():
        p = prev_series.get(label) or {}
        for n in _rates(report.run.kind):
            if s.get(n) is not None and p.get(n) is not None:
                rows.append((f"{label} {n}" if report.run.kind == "rag" else n, float(p[n]), float(s[n])))
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.26 * len(rows) + 1)))
    ys = list(range(len(rows)))
    ax.barh(
        [y + 0.2 for y in ys],
        [r[1] for r in rows],
        0.4,
        label=f"previous {report.comparison['run_id'][-8:]}",
        color="#BAB0AC",
    )
    ax.barh([y - 0.2 for y in ys], [r[2] for r in rows], 0.4, label="this run", color="#4C78A8")
    ax.set_yticks(ys, [r[0] for r in rows])
    ax.set_xlim(0, 1.05)
    ax.invert_yaxis()
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("This run vs the previous run")
    ax.grid(axis="x", alpha=0.3)
    return _svg(fig)


def plots(report: BenchmarkReport) -> dict[str, str | None]:
    """``{name: svg}``; ``None`` for all when matplotlib is not installed."""
    try:
        _plt()
    except ImportError:
        return dict.fromkeys(PLOT_NAMES)
    out: dict[str, str | None] = {
        "metrics": plot_metrics(report),
        "latency": plot_latency(report),
        "tags": plot_tags(report),
    }
    if report.comparison is not None:
        out["diff"] = plot_diff(report)
    return out


def format_cell(v: Any) -> str:
    """One table cell as text (HTML-escaped): ``—`` for none, floats to 4 places without trailing zeros."""
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.4f}".rstrip("0").rstrip(".") if abs(v) < 1000 else f"{v:.0f}"
    return html.escape(str(v))


def _table(headers: list[str], rows: list[list[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{format_cell(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def summary_rows(report: BenchmarkReport) -> tuple[list[str], list[list[Any]]]:
    """The summary table (also printed by the CLI)."""
    if report.run.kind == "rag":
        names = [*RAG_RATES, "p50_latency_ms", "p95_latency_ms", "failed_count", "case_count"]
        return ["mode", *names], [[mode, *[s.get(n) for n in names]] for mode, s in _series(report).items()]
    names = [
        *AGENT_RATES,
        "average_steps",
        "average_latency_ms",
        "average_token_usage",
        "failed_count",
        "case_count",
        "overhead_ms_per_case",
    ]
    s = report.metrics or {}
    rows = [[n, s.get(n)] for n in names] + [[f"pass^{k}", v] for k, v in (s.get("pass_hat_k") or {}).items()]
    return ["metric", "value"], rows


def tag_rows(report: BenchmarkReport) -> tuple[list[str], list[list[Any]]]:
    """The per-tag table (also printed by the CLI): agent — each tag's rates, case runs and median latency; rag —
    one row per tag and mode."""
    from .metrics import percentile

    if report.run.kind == "rag":
        names = ["hit_at_5", "recall_at_k", "mrr", "ndcg_at_10", "p50_latency_ms", "case_count"]
        rows = [
            [tag, mode, *[(m or {}).get(n) for n in names]]
            for tag, modes in sorted(report.by_tag.items())
            for mode, m in sorted(modes.items())
        ]
        return ["tag", "mode", *names], rows
    names = [*AGENT_RATES, "case_count"]
    rows = []
    for tag, m in sorted(report.by_tag.items()):
        latencies = [r.latency_ms for r in report.cases if tag in r.tags and r.latency_ms is not None]
        rows.append([tag, *[m.get(n) for n in names], percentile(latencies, 0.5)])
    return ["tag", *names, "p50_latency_ms"], rows


CSS = """
body{font:14px/1.45 system-ui,"WenQuanYi Micro Hei",sans-serif;margin:24px auto;max-width:1100px;color:#222}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0;font-size:12px}td,th{border:1px solid #ddd;padding:3px 7px;text-align:left}
th{background:#f4f4f4}.status-passed{color:#2a7}.status-failed,.status-error{color:#c33}
figure.plot{margin:10px 0}figure.plot svg{max-width:100%;height:auto}.missing{color:#a60}
pre{background:#f7f7f7;padding:8px;overflow:auto;font-size:11px;max-height:360px}
"""


def render_html(report: BenchmarkReport) -> str:
    run = report.run
    figures = plots(report)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Benchmark {html.escape(run.run_id)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(run.kind.upper())} benchmark · {html.escape(run.dataset_id)}</h1>",
        _table(
            ["run", "status", "dataset hash", "created", "completed"],
            [[run.run_id, run.status, run.dataset_hash, run.created_at, run.completed_at]],
        ),
    ]
    if run.error is not None:
        parts.append(
            f'<p class="status-error">Run error {html.escape(run.error.code)}: {html.escape(run.error.message)}</p>'
        )
    headers, rows = summary_rows(report)
    parts += ["<h2>Summary</h2>", _table(headers, rows, "summary")]
    titles = {
        "metrics": "Metrics (95 % confidence intervals)",
        "latency": "Latency distribution",
        "tags": "Per-tag breakdown",
        "diff": "Diff with the previous run",
    }
    for name, svg in figures.items():
        parts.append(f"<h2>{titles[name]}</h2>")
        if name == "tags" and report.by_tag:
            parts.append(_table(*tag_rows(report), "tags"))
        if svg is None:
            parts.append(f'<p class="missing" data-plot="{name}">Plot unavailable: matplotlib is not installed.</p>')
        else:
            parts.append(f'<figure class="plot" data-plot="{name}">{svg}</figure>')
    parts.append(f"<h2>Failures ({len(report.failures)})</h2>")
    parts.append(
        _table(
            ["case", "mode", "repeat", "status", "reason", "trace run"],
            [[f.case_id, f.mode, f.repeat, f.status, f.failure_reason, f.trace_run_id] for f in report.failures],
            "failures",
        )
    )
    score_names = sorted({k for r in report.cases for k in r.scores})
    parts.append(f"<h2>Cases ({len(report.cases)})</h2>")
    parts.append(
        _table(
            ["case", "mode", "repeat", "status", "latency ms", *score_names, "tags"],
            [
                [
                    r.case_id,
                    r.mode,
                    r.repeat,
                    r.status,
                    r.latency_ms,
                    *[r.scores.get(n) for n in score_names],
                    ", ".join(r.tags),
                ]
                for r in report.cases
            ],
            "cases",
        )
    )
    snapshot = json.dumps(run.config_snapshot, ensure_ascii=False, indent=2)
    parts += ["<h2>Configuration snapshot</h2>", f"<pre>{html.escape(snapshot)}</pre>", "</body></html>"]
    return "\n".join(parts)
