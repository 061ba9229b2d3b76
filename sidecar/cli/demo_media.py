"""What the demo makes and writes besides the wire calls: the espeak-ng meeting, SRT/text transcripts, the summary
note's Markdown, the theme package, the agent trace timeline and the index page. Pure functions of their inputs."""

from __future__ import annotations

import html
import json
import re
import shutil
import struct
import subprocess
import tempfile
import wave
import zipfile
import zlib
from pathlib import Path
from typing import Any

from sidecar.core.childenv import scrubbed_environ

VOICES = {
    "A": ["-v", "en-us+m1", "-p", "30", "-s", "150"],
    "B": ["-v", "en-us+f3", "-p", "60", "-s", "150"],
}
"""Two espeak variants the diarization pipeline tells apart (the media tests use the same two)."""
MEETING = [
    ("A", "Good morning everyone. Let us plan the product launch. The launch date is Friday the twelfth of June."),
    ("B", "Thanks. The marketing budget is forty thousand dollars, and the design review is on Wednesday."),
    ("A", "Great. Maria will prepare the slides and Tom will test the mobile app before the review."),
    ("B", "I will send the meeting notes to the whole team this afternoon."),
]
GAP_S = 1.0
THEME_ID = "demo-dusk"
THEME_ACCENT = "#7b2cbf"
DIAGRAM_TITLE = "Meeting flow"
TURN_PREFIX = re.compile(r"^\s*(\[[^\]]*\]\s*)?([A-Za-z_]+[0-9]+:\s*)?")
"""The ``[00:00–00:07] SPEAKER_00: `` a transcript note's block starts with."""


class ToolMissing(Exception):
    """A system tool the demo needs is not installed (the message says which and how to get it)."""


def make_meeting(path: Path) -> float:
    """Write the two-speaker meeting (espeak-ng voices A and B, ``GAP_S`` of silence between turns); its seconds."""
    if shutil.which("espeak-ng") is None:
        raise ToolMissing("espeak-ng is not installed (scripts/setup installs it), or pass --audio FILE")
    frames: list[bytes] = []
    rate = 22050
    with tempfile.TemporaryDirectory(prefix="metona-demo-tts-") as tmp:
        for i, (voice, text) in enumerate(MEETING):
            out = Path(tmp) / f"t{i}.wav"
            subprocess.run(
                ["espeak-ng", *VOICES[voice], "-w", str(out), text],
                check=True,
                capture_output=True,
                env=scrubbed_environ(),
            )
            with wave.open(str(out)) as w:
                rate, width = w.getframerate(), w.getsampwidth()
                frames.append(w.readframes(w.getnframes()))
            frames.append(b"\0" * int(GAP_S * rate) * width)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"".join(frames))
    return sum(len(f) for f in frames) / 2 / rate


def _srt_time(seconds: float) -> str:
    ms = round(seconds * 1000)
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d},{ms:03d}"


def srt(segments: list[dict[str, Any]]) -> str:
    cues = []
    for i, seg in enumerate(segments, start=1):
        who = f"[{seg['speaker']}] " if seg.get("speaker") else ""
        span = f"{_srt_time(seg['start_time'])} --> {_srt_time(seg['end_time'])}"
        cues.append(f"{i}\n{span}\n{who}{seg['text'].strip()}\n")
    return "\n".join(cues)


def plain_text(segments: list[dict[str, Any]]) -> str:
    lines = []
    for seg in segments:
        who = f"{seg['speaker']}: " if seg.get("speaker") else ""
        lines.append(f"[{seg['start_time']:6.1f}–{seg['end_time']:6.1f} s] {who}{seg['text'].strip()}")
    return "\n".join(lines) + "\n"


def turns_of(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The note's speaker turns: (speaker, start, end, text) of each block that cites the audio."""
    turns = []
    for block in blocks:
        cite = next((c for c in block.get("citations") or [] if c.get("start_time") is not None), None)
        if cite is None:
            continue
        text = TURN_PREFIX.sub("", block.get("text") or "")
        turns.append(
            {
                "speaker": cite.get("speaker") or "speaker",
                "start": float(cite["start_time"]),
                "end": float(cite.get("end_time") or cite["start_time"]),
                "text": text.strip(),
            }
        )
    return turns


def _short(text: str, words: int = 5) -> str:
    """A Mermaid-safe label: the turn's first words, without quotes or brackets."""
    clean = "".join(ch for ch in text if ch.isalnum() or ch in " ,.'-")
    parts = clean.split()
    return " ".join(parts[:words]) + (" …" if len(parts) > words else "")


def summary_markdown(title: str, note_id: str, turns: list[dict[str, Any]]) -> tuple[str, str, str]:
    """(the summary note's Markdown, its Mermaid source, its function-plot source)."""
    speakers = sorted({t["speaker"] for t in turns})
    duration = max((t["end"] for t in turns), default=0.0)
    lines = ["flowchart TD", f'  start(["{DIAGRAM_TITLE}"])']
    prev = "start"
    for i, t in enumerate(turns, start=1):
        lines.append(f'  T{i}["{t["speaker"]} at {t["start"]:.0f} s: {_short(t["text"])}"]')
        lines.append(f"  {prev} --> T{i}")
        prev = f"T{i}"
    mermaid = "\n".join(lines)
    plot_lines = ["expressions:"]
    for who in speakers:
        spoken = sum(t["end"] - t["start"] for t in turns if t["speaker"] == who)
        share = spoken / duration if duration else 0.0
        plot_lines += [f"  - expression: {share:.3f}*x", f"    label: {who} speaking seconds"]
    plot_lines += [f"domain: [0, {max(duration, 1.0):.1f}]", f"range: [0, {max(duration, 1.0):.1f}]"]
    plot = "\n".join(plot_lines)
    body = [
        f"# Summary: {title}",
        "",
        f"From the transcript note *{title}* (`{note_id}`): {len(turns)} turns by {len(speakers)} speakers "
        f"over {duration:.1f} s.",
        "",
        "## Who spoke when",
        "",
        "```mermaid",
        mermaid,
        "```",
        "",
        "## Speaking time",
        "",
        "Cumulative speaking seconds if each speaker's share were spread evenly over the meeting:",
        "",
        "```function_plot",
        plot,
        "```",
        "",
        "## Turns",
        "",
    ]
    body += [f"- **{t['speaker']}** ({t['start']:.1f}–{t['end']:.1f} s): {t['text']}" for t in turns]
    return "\n".join(body) + "\n", mermaid, plot


def _png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\0" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def theme_package(path: Path) -> Path:
    """A community theme as a §11.1 package (.zip): theme.yaml, theme.css and a preview PNG."""
    manifest = (
        f"theme_id: {THEME_ID}\nname: Dusk (Metona demo)\nversion: 1.0.0\nauthor: Metona demo\n"
        "description: A violet theme the demo builds, inspects, installs and exports with.\n"
        "min_app_version: 0.1.0\nis_dark: false\ncss_entry: theme.css\npreview: preview.png\n"
    )
    css = (
        f":root {{ --accent: {THEME_ACCENT}; }}\n"
        "body { color: #1f1630; background: #fbf8ff; font-family: Georgia, serif; }\n"
        f"h1, h2 {{ color: {THEME_ACCENT}; }}\n"
    )
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("theme.yaml", manifest)
        zf.writestr("theme.css", css)
        zf.writestr("preview.png", _png(32, 20, (123, 44, 191)))
    return path


def cited_passage(cited: dict[str, Any]) -> str:
    """One line for a cited passage: ``note <id> block <id>, attachment <id> 3.0–7.2 s SPEAKER_00: "text"``."""
    where = f"note {cited.get('note_id')} block {cited.get('block_id')}"
    if cited.get("source_audio"):
        where += f", attachment {cited['source_audio']}"
        if cited.get("start_time") is not None:
            where += f" {cited['start_time']:.1f}–{cited.get('end_time') or cited['start_time']:.1f} s"
        if cited.get("speaker"):
            where += f" {cited['speaker']}"
    text = TURN_PREFIX.sub("", " ".join(str(cited.get("text") or "").split()))
    return f"{where}: {text!r}"


def _citation_gist(data: dict[str, Any]) -> str:
    """A Citation event's row: the cited passage once per audio source it carries (or once without one)."""
    sources = [c for c in data.get("citations") or [] if c.get("source_audio")] or [{}]
    return "\n".join(cited_passage({**data, **c}) for c in sources)


def trace_timeline(run: dict[str, Any], events: list[dict[str, Any]]) -> str:
    """The agent run's trace as one self-contained HTML timeline (time since the first event, event, its gist);
    a ``Citation`` row shows the cited passage with its attachment, seconds and speaker."""
    t0 = _ms(events[0]["timestamp"]) if events else 0
    rows = []
    for e in events:
        data = e.get("data") or {}
        if e["event"] == "Citation":
            text = _citation_gist(data)
        else:
            keys = ("tool_name", "args", "success", "summary", "finish_reason", "decision")
            gist = {k: data[k] for k in keys if k in data}
            if "usage" in data:
                gist["usage"] = data["usage"]
            text = json.dumps(gist, ensure_ascii=False)[:400]
        rows.append(
            f"<tr><td>{e['sequence']}</td><td>{_ms(e['timestamp']) - t0:+.0f} ms</td>"
            f"<td><b>{html.escape(e['event'])}</b></td><td><code>{html.escape(text)}</code></td></tr>"
        )
    head = f"Agent run {html.escape(run.get('run_id', ''))} · {html.escape(run.get('status', ''))}"
    return _page(
        head,
        f"<h1>{head}</h1><p>provider {html.escape(str(run.get('provider_id')))}, model "
        f"{html.escape(str(run.get('model')))}</p><table><tr><th>#</th><th>t</th><th>event</th><th>data</th></tr>"
        + "".join(rows)
        + "</table>",
    )


def _ms(timestamp: Any) -> float:
    from datetime import datetime

    if isinstance(timestamp, int | float):
        return float(timestamp)
    return datetime.fromisoformat(str(timestamp).replace("Z", "+00:00")).timestamp() * 1000


def index_page(summary: dict[str, Any], labels: dict[str, str]) -> str:
    """DIR/index.html: every step with its status and time, and a link to every output."""
    rows = []
    for step in summary["steps"]:
        links = " · ".join(f'<a href="{html.escape(p)}">{html.escape(labels.get(p, p))}</a>' for p in step["outputs"])
        rows.append(
            f"<tr><td>{html.escape(step['name'])}</td><td class='{step['status']}'>{step['status']}</td>"
            f"<td>{step['seconds']:.1f} s</td><td>{links}</td></tr>"
        )
    provider = summary["provider"]
    title = "Metona demo: " + ("every step ok" if summary["ok"] else "a step failed")
    return _page(
        title,
        f"<h1>{html.escape(title)}</h1><p>provider {html.escape(str(provider.get('id')))} "
        f"({html.escape(str(provider.get('kind')))}, {html.escape(str(provider.get('model')))}) · "
        f'<a href="summary.json">summary.json</a> · <a href="sidecar-stderr.log">the sidecar\'s log</a></p>'
        "<table><tr><th>step</th><th>status</th><th>time</th><th>outputs</th></tr>"
        + "".join(rows)
        + "</table>"
        + _answer(summary),
    )


def _answer(summary: dict[str, Any]) -> str:
    """The agent's answer and the transcript passage its trace cites (attachment, seconds, speaker)."""
    details: dict[str, Any] = next((s["details"] for s in summary["steps"] if s["name"] == "agent"), {})
    if not details.get("answer"):
        return ""
    cited = details.get("citation")
    if cited:
        source = f"<p>cited (the trace's Citation event): {html.escape(cited_passage(cited))}</p>"
    else:
        others = html.escape(str(details.get("cited_note_ids")))
        source = f"<p>the trace cites no passage of the transcript note (notes cited: {others})</p>"
    return f"<h2>The agent's answer</h2><blockquote>{html.escape(details['answer'])}</blockquote>{source}"


def _page(title: str, body: str) -> str:
    css = (
        "body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}"
        ".ok{color:#080}.failed{color:#b00}.skipped{color:#888}code{font-size:12px}"
    )
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{css}</style></head><body>{body}</body></html>\n"
    )
