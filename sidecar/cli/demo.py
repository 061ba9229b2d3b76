"""``metona-sidecar demo``: the seeds' acceptance chain (phase-2 §15.4), walked over stdio as the app walks it.

    metona-sidecar demo [-o DIR] [--binary PATH] [--provider PRESET] [--audio FILE] [--keep] [--quiet]

It spawns the sidecar (``python -m sidecar``, or ``--binary PATH``) on a fresh data directory and drives it only
through the wire contract: a two-speaker meeting (espeak-ng) is imported and transcribed with diarization, the
transcript becomes a cited note, a hybrid search finds a turn, the reference MCP server ``mcp-server-time`` is
installed as a plugin, an agent run answers from the note and calls the plugin's tool, a Markdown summary with a
Mermaid diagram and a function plot is written and exported to HTML, PDF and DOCX, a community theme is inspected,
installed, previewed, enabled and exported with, the RAG benchmark runs on ``rag-core-v1``, and a PDF (a product brief
the sidecar exports) is imported as a cited note that a search and the agent answer from, citing its page. No network,
no key.

Progress goes to stderr (one line per step and per milestone), the human summary to stdout, ``DIR/summary.json``
and ``DIR/index.html`` to the output folder. Exit 1 when a step failed (the steps that do not depend on it still
run), 2 when the sidecar could not be started.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ..workers import engines
from . import demo_media as media
from .wire_client import WireClient, WireError

CHECKOUT = Path(__file__).resolve().parents[2]
"""The source checkout the package runs from (where scripts/setup put the reference servers and the model)."""
TIME_SERVER = Path("tools") / "mcp-ref" / ".venv" / "bin" / "mcp-server-time"
"""In a checkout: the reference server in its own venv (its own interpreter, not the sidecar's: scripts/setup)."""
PREPARED_MODEL = Path(".cache") / "local-model"
PLUGIN_ID = "time"
TIME_TOOL = f"{PLUGIN_ID}.get_current_time"
SEARCH_TOOL = "knowledge_search"
"""The agent's search over the notes index: its hits come back as the trace's ``Citation`` events."""
TRANSCRIPT_TITLE = "Product launch meeting"
SEARCH_QUERY = "when is the product launch date"
QUESTION = "When is the product launch, and what is the current time in UTC?"
AGENT_CALLS = [
    {"name": SEARCH_TOOL, "arguments": {"query": "product launch date"}},
    {"name": TIME_TOOL, "arguments": {"timezone": "UTC"}},
]
"""The two calls the agent is asked to make in its first reply (the local provider asks for the answer after one
round of tool results, so both must come in that round)."""
KEY_VARIABLE = "METONA_LIVE_{}_API_KEY"
"""``--provider PRESET``'s key: the README's per-vendor variable (e.g. ``METONA_LIVE_DEEPSEEK_API_KEY``), handed to
the sidecar only in ``providers/create`` (write-only, stored encrypted), never in its environment."""
TRANSCRIBE_TIMEOUT_S = 600.0
AGENT_TIMEOUT_S = 600.0
"""Generous: the first use of the local model on a machine without the prepared model converts it (35–55 s)."""


class StepFailed(Exception):
    """A step's contract did not hold (the sidecar answered, but not what the chain needs)."""

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.error = {"code": code, "message": message, "details": details or {}}


@dataclass
class Step:
    name: str
    needs: tuple[str, ...]
    run: Callable[[Demo], None]
    prepare: Callable[[Demo], None] | None = None
    """Started at once on its own thread (needs nothing); the step runs after it, and a failure of it is the step's."""
    status: str = "skipped"
    seconds: float = 0.0
    outputs: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)


class Demo:
    """The state the steps share: the client, the output folder, and what earlier steps found."""

    def __init__(self, ns: argparse.Namespace, out: Path, client: WireClient, init: dict[str, Any]) -> None:
        self.ns = ns
        self.out = out
        self.client = client
        self.init = init
        self.data_dir = Path(init["data_dir"])
        self.found: dict[str, Any] = {}
        self.provider: dict[str, Any] = {"id": None, "model": None, "kind": None}
        self.labels: dict[str, str] = {}
        self._local = threading.local()  # the step each thread runs
        self.finished: dict[str, threading.Event] = {}
        """Set when a step has ended (ok, failed or skipped): ``run_steps`` fills it."""

    @property
    def step(self) -> Step:
        return self._local.step

    @step.setter
    def step(self, step: Step) -> None:
        self._local.step = step

    # -- helpers the steps share -------------------------------------------------------------------------------
    def say(self, text: str) -> None:
        if not self.ns.quiet:
            sys.stderr.write(f"demo   {self.step.name}: {text}\n")
            sys.stderr.flush()

    def output(self, name: str, label: str) -> None:
        """A file in the output folder joins this step's outputs (and index.html)."""
        self.step.outputs.append(name)
        self.labels[name] = label

    def call(self, method: str, params: Any = None, timeout: float = 60.0) -> Any:
        return self.client.call(method, params, timeout)

    def write(self, name: str, data: str | bytes, label: str) -> Path:
        path = self.out / name
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data, encoding="utf-8")
        self.output(name, label)
        return path

    def export(self, source: dict[str, Any], fmt: str, name: str, label: str, options: dict[str, Any]) -> str:
        """Run one export job to its end and download its file in chunks; the job id."""
        job = self.call("exports/create", {"source": source, "format": fmt, "options": options})
        self.client.follow(job["job_id"], timeout=300)
        done = self.call("exports/get", {"job_id": job["job_id"]})
        if done["status"] != "completed":
            raise StepFailed("EXPORT_FAILED", f"the {fmt} export ended {done['status']}", {"job": done})
        chunks, offset = [], 0
        while True:
            part = self.call("exports/file", {"job_id": job["job_id"], "offset": offset})
            chunks.append(base64.b64decode(part["data_base64"]))
            offset += part["length"]
            if part["eof"]:
                break
        data = b"".join(chunks)
        self.write(name, data, label)
        warnings = [w.get("code", w) if isinstance(w, dict) else w for w in done.get("warnings") or []]
        self.say(f"{fmt}: {len(data):,} bytes, job {job['job_id']}" + (f", warnings {warnings}" if warnings else ""))
        return str(job["job_id"])


# -- the steps ----------------------------------------------------------------------------------------------------
def transcribe(d: Demo) -> None:
    if d.ns.audio:
        audio = Path(d.ns.audio).resolve()
        if not audio.is_file():
            raise StepFailed("AUDIO_NOT_FOUND", f"--audio {audio} is not a file")
        d.say(f"audio {audio}")
    else:
        audio = d.out / "meeting.wav"
        try:
            seconds = media.make_meeting(audio)
        except media.ToolMissing as exc:
            raise StepFailed("ESPEAK_UNAVAILABLE", str(exc)) from None
        d.output(audio.name, "the meeting (WAV, espeak-ng)")
        d.say(f"made a {seconds:.1f} s two-speaker meeting with espeak-ng")
    attachment = d.call("attachments/import", {"path": str(audio)})
    params = {
        "attachment_id": attachment["attachment_id"],
        "profile_id": "en-fast",
        "language": "en",
        "diarization": True,
    }
    job = d.call("media/transcriptions/create", params)
    d.step.details["job_id"] = job["job_id"]
    d.say(f"attachment {attachment['attachment_id']}, job {job['job_id']}")
    shown: set[str] = set()
    phases: dict[str, float] = {}
    created = time.perf_counter()

    def progress(item: dict[str, Any]) -> None:
        name, data = item["event"], (item.get("data") or {}).get("data") or {}
        if name != "Progress":
            phases[name] = round(time.perf_counter() - created, 1)
        if name == "Progress" and data.get("total"):
            pct = int(100 * data["current"] / data["total"])
            if pct // 25 * 25 not in {int(s) for s in shown if s.isdigit()}:
                shown.add(str(pct // 25 * 25))
                d.say(f"transcribing {pct}%")
        elif name != "Progress":
            d.say(name)

    d.client.follow(job["job_id"], progress, timeout=TRANSCRIBE_TIMEOUT_S)
    done = d.call("media/transcriptions/get", {"job_id": job["job_id"]})
    if done["status"] != "completed":
        raise StepFailed("TRANSCRIPTION_FAILED", f"the job ended {done['status']}", {"error": done.get("error")})
    segments = done["segments"]
    speakers = sorted({s["speaker"] for s in segments if s.get("speaker")})
    d.write("transcript.srt", media.srt(segments), "transcript (SRT)")
    d.write("transcript.txt", media.plain_text(segments), "transcript (text)")
    d.found.update(attachment_id=attachment["attachment_id"], job_id=job["job_id"], segments=segments)
    d.step.details.update(
        attachment_id=attachment["attachment_id"],
        language=done.get("language"),
        duration_s=done.get("duration"),
        segments=len(segments),
        speakers=speakers,
        warnings=[w.get("code") if isinstance(w, dict) else w for w in done.get("warnings") or []],
        seconds_after_create=phases,
    )
    d.say(f"{len(segments)} segments, speakers {speakers or 'none'}")
    if not segments:
        raise StepFailed("TRANSCRIPT_EMPTY", "the transcript has no segments")


def note(d: Demo) -> None:
    made = d.call(
        "media/transcriptions/notes",
        {"job_id": d.found["job_id"], "title": TRANSCRIPT_TITLE, "folder": "Meetings"},
        timeout=120,
    )
    blocks = made["blocks"]
    cited = [b for b in blocks if any(c.get("source_audio") for c in b.get("citations") or [])]
    d.write("transcript-note.md", made["content"], "transcript note (Markdown)")
    d.found.update(note_id=made["note_id"], note_title=made["title"], blocks=blocks)
    d.step.details.update(note_id=made["note_id"], blocks=len(blocks), cited_blocks=len(cited))
    d.say(f"note {made['note_id']}: {len(blocks)} blocks, {len(cited)} cite the audio")
    if not cited:
        raise StepFailed("NOTE_UNCITED", "no block of the transcript note cites the audio")


def search(d: Demo) -> None:
    found = d.call("search/query", {"query": SEARCH_QUERY, "mode": "hybrid", "top_k": 3}, timeout=120)
    hit = next((h for h in found["items"] if h["note_id"] == d.found["note_id"]), None)
    if hit is None:
        raise StepFailed("SEARCH_MISSED", "the hybrid search did not find the transcript note", {"result": found})
    cite = next((c for c in hit["citations"] if c.get("source_audio")), None)
    if cite is None:
        raise StepFailed("SEARCH_UNCITED", "the hit carries no audio citation", {"hit": hit})
    d.found.update(hit=hit, citation=cite)
    d.step.details.update(
        query=SEARCH_QUERY,
        rank=found["items"].index(hit) + 1,
        block_id=hit["block_id"],
        text=hit["text"],
        citation={k: cite.get(k) for k in ("source_audio", "start_time", "end_time", "speaker")},
        duration_ms=found["duration_ms"],
    )
    d.say(
        f"hit #{found['items'].index(hit) + 1}: attachment {cite['source_audio']}, "
        f"{cite['start_time']:.1f}–{cite['end_time']:.1f} s, {cite.get('speaker')}: {hit['text'][:80]!r}"
    )


def plugin(d: Demo) -> None:
    roots = checkouts(d.ns.binary)
    server = time_server(roots)
    if server is None:
        where = ", ".join(str(r / TIME_SERVER) for r in roots)
        raise StepFailed(
            "PLUGIN_SERVER_NOT_FOUND",
            f"the reference MCP server mcp-server-time is not installed ({where} or PATH; scripts/setup step 8)",
        )
    manifest = {
        "id": PLUGIN_ID,
        "name": "Time (reference MCP server)",
        "version": "1.0.0",
        "description": "mcp-server-time from PyPI: current time and time-zone conversion",
        "min_app_version": "0.1.0",
        "backend": {"type": "mcp", "transport": "stdio", "command": str(server), "args": []},
        "permissions": ["tools"],
        "tools": {"timeout_ms": 10000},
    }
    # the host hands a package over by copying it into plugins/.incoming/ (production mode: no development flag)
    package_id = f"demo-{PLUGIN_ID}-plugin"
    incoming = d.data_dir / "plugins" / ".incoming" / package_id
    incoming.mkdir(parents=True, exist_ok=True)
    (incoming / "plugin.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    d.write("plugin.json", json.dumps(manifest, indent=2), "plugin manifest")
    info = d.call("plugins/install", {"package_id": package_id}, timeout=60)
    host = info["host"]
    if host["status"] != "ready" or TIME_TOOL not in host["tools"]:
        raise StepFailed("PLUGIN_NOT_READY", f"the plugin host is {host['status']}", {"host": host})
    listed = {t["name"] for t in d.call("tools/list")["items"]}
    published = sorted(n for n in listed if n.startswith(f"{PLUGIN_ID}."))
    d.step.details.update(plugin_id=info["plugin_id"], tools=published, server=str(server))
    d.say(f"plugin {info['plugin_id']} ready (pid {host.get('pid')}), tools {published}")
    if TIME_TOOL not in published:
        raise StepFailed("PLUGIN_TOOLS_MISSING", f"{TIME_TOOL} is not in tools/list", {"tools": sorted(listed)})


def prepare_agent(d: Demo) -> None:
    """From the start, beside the transcription: configure the run's provider — ``--provider`` (configured), else
    the embedded model, which is loaded now with a one-token answer so that its load overlaps the other steps' work.
    The scripted mock (neither can run) is configured in the step, once the passage it recites is known."""
    if d.ns.provider:
        presets = {p["preset"]: p for p in d.call("providers/presets")["items"]}
        preset = presets.get(d.ns.provider)
        if preset is None:
            raise StepFailed("PROVIDER_PRESET_UNKNOWN", f"--provider {d.ns.provider}: no such preset",
                             {"presets": sorted(presets)})  # fmt: skip
        params: dict[str, Any] = {"preset": d.ns.provider, "provider_id": f"demo-{d.ns.provider}"}
        variable = key_variable(d.ns.provider)
        if os.environ.get(variable):
            params["api_key"] = os.environ[variable]
        elif preset.get("requires_api_key"):
            raise StepFailed("PROVIDER_KEY_MISSING", f"--provider {d.ns.provider} needs its API key in {variable}",
                             {"variable": variable})  # fmt: skip
        made = d.call("providers/create", params)
        d.provider = {"id": made["provider_id"], "model": made.get("default_model"), "kind": "configured"}
        return
    local = d.init["capabilities"]["components"].get("local_model") or {}
    if not local.get("available"):
        d.found["local_unavailable"] = local.get("detail") or "local_model is not reported available"
        return
    # The text tool path (issue 24's constrained path is the default): the question below spells out the two calls
    # in the model's own <tool_call> form, which only the text path reads; measured, the constrained path makes one
    # of the two calls and then answers (2 of 2 runs, either wording order).
    made = d.call("providers/create", {"preset": "local", "options": {"tool_mode": "text"}})
    d.provider = {"id": made["provider_id"], "model": made.get("default_model"), "kind": "local"}
    started = time.perf_counter()
    d.call("chat/send", {"provider_id": made["provider_id"], "request": _request("Say OK.", 1)}, AGENT_TIMEOUT_S)
    d.found["warmup_s"] = round(time.perf_counter() - started, 2)


def mock_provider(d: Demo, passage: str, label: str) -> dict[str, Any]:
    d.say(f"the embedded model cannot run here ({d.found.get('local_unavailable')}): using the scripted mock provider")
    calls = [{"id": f"c{i}", "name": c["name"], "args": c["arguments"]} for i, c in enumerate(AGENT_CALLS, start=1)]
    turns = [{"tool_calls": calls}, {"text": f"According to the meeting note {label}: {passage}"}]
    made = d.call(
        "providers/create", {"preset": "mock", "provider_id": "demo-mock", "options": {"script": {"turns": turns}}}
    )
    return {"id": made["provider_id"], "model": made.get("default_model"), "kind": "mock"}


ROLE = (
    f"You answer questions about the user's meeting notes. Use {SEARCH_TOOL} to find the passage in the notes "
    f"and {TIME_TOOL} for the current time."
)


DOC_ROLE = (
    f"You answer questions about the user's documents. Use {SEARCH_TOOL} to find the passage, then answer in one "
    "sentence from what it found and say which page of which document it is on."
)


def _request(text: str, max_tokens: int = 120, role: str = ROLE) -> dict[str, Any]:
    return {
        "meta": {
            "sessionId": "demo",
            "iteration": 1,
            "requestId": "demo-agent",
            "timestamp": 0,
            "agentVersion": "demo",
        },
        "systemPrompt": {"roleDefinition": role, "outputConstraints": "", "safetyGuidelines": ""},
        "messages": [{"role": "user", "content": text, "timestamp": 0}],
        "params": {"stream": False, "maxTokens": max_tokens, "temperature": 0},
    }


def agent_question() -> str:
    """The question and the two calls to make first, written the way the model writes a call (Qwen's tags).

    Measured on the embedded model (f32, greedy: the same prompt gives the same reply; 11 runs of five wordings):
    asked in words to call both tools ("call both tools now, in one reply", "make two tool calls: 1. … 2. …",
    "write two <tool_call> blocks …") it calls knowledge_search only, then has to answer without the time (and
    invents one); naming the time tool first, it calls only that one. With the calls spelled out it makes both in
    its first reply. With the local provider's ``tool_followup: "free"`` it loops instead (search, time, search, …
    until ``max_iterations``)."""
    calls = "".join(f"<tool_call>\n{json.dumps(c)}\n</tool_call>\n" for c in AGENT_CALLS)
    return f"{QUESTION}\nReply with these two tool calls, then you get their results:\n{calls}".rstrip("\n")


def transcript_citation(events: list[dict[str, Any]], note_id: str) -> dict[str, Any] | None:
    """The trace's first ``Citation`` of the transcript note, flattened with its audio source, or None."""
    for e in events:
        data = e.get("data") or {}
        if e["event"] != "Citation" or data.get("note_id") != note_id:
            continue
        audio: dict[str, Any] = next((c for c in data.get("citations") or [] if c.get("source_audio")), {})
        cited = {k: data.get(k) for k in ("note_id", "note_title", "block_id", "text", "tool_call_id")}
        cited.update({k: audio.get(k) for k in ("source_audio", "start_time", "end_time", "speaker")})
        return cited
    return None


def run_and_trace(
    d: Demo, params: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """Start an agent run, answer its permission requests as the app would (allow once), follow it to its end;
    ``(run, final run, trace events, permission decisions)``."""
    run = d.call("agent/runs/create", params)
    d.step.details["run_id"] = run["run_id"]
    decisions: list[dict[str, Any]] = []

    def on_event(item: dict[str, Any]) -> None:
        data = (item.get("data") or {}).get("data") or {}
        if item["event"] == "PermissionRequired":  # the user's answer, as the app would ask for it
            d.call("agent/permissions/resolve", {"run_id": run["run_id"], "request_id": data["request_id"],
                                                 "decision": "allow_once"})  # fmt: skip
            decisions.append({"tool_name": data.get("tool_name"), "decision": "allow_once"})
        elif item["event"] in ("ToolCall", "ModelCallCompleted", "RunCompleted", "RunFailed"):
            call = f" {data['tool_name']} {json.dumps(data.get('args'))}" if "tool_name" in data else ""
            d.say(item["event"] + call)

    d.client.follow(run["run_id"], on_event, timeout=AGENT_TIMEOUT_S)
    final = d.call("agent/runs/get", {"run_id": run["run_id"]})
    events: list[dict[str, Any]] = []
    cursor = 0
    while True:
        page = d.call("agent/runs/trace", {"run_id": run["run_id"], "after_sequence": cursor, "limit": 1000})
        events += page["items"]
        cursor = page["next_sequence"]
        if not page["has_more"]:
            break
    return run, final, events, decisions


def agent(d: Demo) -> None:
    cite, hit = d.found["citation"], d.found["hit"]
    span = f"{cite['start_time']:.1f}–{cite['end_time']:.1f} s"
    passage = media.TURN_PREFIX.sub("", hit["text"]).strip()
    if d.provider["id"] is None:
        d.provider = mock_provider(d, passage, f"(note {d.found['note_id']}, {cite.get('speaker')}, {span})")
    warm = f", loaded beside the other steps in {d.found['warmup_s']:.1f} s" if "warmup_s" in d.found else ""
    d.say(f"provider {d.provider['id']} ({d.provider['kind']}, {d.provider['model']}){warm}")
    # As the app asks: the run is offered only the notes search and the plugin's tool; the citation is structural
    # (the search tool's hits become the trace's Citation events), never a mark the model has to copy.
    params = {
        "provider_id": d.provider["id"],
        "request": _request(agent_question()),
        "allowed_tools": [SEARCH_TOOL, TIME_TOOL],
        "max_iterations": 3,
    }
    run, final, events, decisions = run_and_trace(d, params)
    d.write("agent-trace.html", media.trace_timeline(final, events), "agent trace (timeline)")
    d.write("agent-trace.json", json.dumps({"run": final, "events": events}, indent=2), "agent trace (JSON)")
    calls = [e["data"] for e in events if e["event"] == "ToolCall"]
    results = {e["data"]["tool_call_id"]: e["data"] for e in events if e["event"] == "ToolResult"}
    tools_called = [c["tool_name"] for c in calls]

    def succeeded(tool: str) -> bool:
        return any(c["tool_name"] == tool and results.get(c["tool_call_id"], {}).get("success") for c in calls)

    answer = final.get("output") or ""
    cited_ids = sorted({e["data"].get("note_id") for e in events if e["event"] == "Citation"} - {None})
    cited = transcript_citation(events, d.found["note_id"])
    summary = final.get("summary") or {}
    d.step.details.update(
        answer=answer,
        tools_called=tools_called,
        search_tool_succeeded=succeeded(SEARCH_TOOL),
        plugin_tool_succeeded=succeeded(TIME_TOOL),
        cited_note_ids=cited_ids,
        citation_found=cited is not None,
        citation=cited,
        status=final["status"],
        error=final.get("error"),
        model_calls=summary.get("model_calls"),
        model_call_ms=[e["data"].get("duration_ms") for e in events if e["event"] == "ModelCallCompleted"],
        token_usage=summary.get("token_usage"),
        permission_decisions=decisions,
        warmup_s=d.found.get("warmup_s"),
        trace_events=len(events),
    )
    d.found["answer"] = answer
    d.say(
        f"trace: {len(events)} events, {summary.get('model_calls')} model calls, tools {tools_called}, "
        f"{len(decisions)} permission decisions, {summary.get('token_usage')} tokens"
    )
    d.say(f"answer: {answer[:160]!r}")
    if cited is not None:
        d.say(f"cites the transcript note: {media.cited_passage(cited)}")
    if final["status"] != "completed":
        raise StepFailed("AGENT_RUN_NOT_COMPLETED", f"the run ended {final['status']}", {"error": final.get("error")})
    if not succeeded(TIME_TOOL):
        raise StepFailed(
            "AGENT_TOOL_NOT_CALLED", f"the trace has no successful {TIME_TOOL} call", {"tools": tools_called}
        )
    if cited is None:
        raise StepFailed(
            "AGENT_NOTE_NOT_CITED",
            f"the trace has no Citation of the transcript note {d.found['note_id']} (no successful {SEARCH_TOOL} "
            "call that found it)",
            {"tools": tools_called, "cited_note_ids": cited_ids},
        )


def render(d: Demo) -> None:
    turns = media.turns_of(d.found["blocks"])
    markdown, mermaid, plot = media.summary_markdown(d.found["note_title"], d.found["note_id"], turns)
    for kind, source, name in (("mermaid", mermaid, "diagram.svg"), ("function_plot", plot, "plot.svg")):
        got = d.call(
            "render/static",
            {"kind": kind, "source": source, "sourceHash": hashlib.sha256(source.encode()).hexdigest()},
            timeout=120,
        )
        d.write(name, got["content"], f"{kind.replace('_', ' ')} (SVG)")
        d.say(f"{kind}: {got['width']:.0f}×{got['height']:.0f} SVG, {len(got['content']):,} bytes")
    # Written once the agent's run has ended (whatever its outcome): the summary repeats the turns, and written
    # during the run it would join the agent's knowledge search as its timing falls, pushing the transcript's
    # blocks down or out of the hits (seen: 4 of 5 hits were the summary's, the transcript's first by 0.02).
    if "agent" in d.finished:
        waiting = time.perf_counter()
        d.finished["agent"].wait()
        d.step.details["waited_for_agent_s"] = round(time.perf_counter() - waiting, 2)
    made = d.call("notes/create", {"title": f"Summary: {d.found['note_title']}", "folder": "Meetings",
                                   "content": markdown})  # fmt: skip
    d.write("summary-note.md", markdown, "summary note (Markdown)")
    d.found["summary_note_id"] = made["note_id"]
    d.step.details.update(note_id=made["note_id"], turns=len(turns), blocks=len(made["blocks"]))
    d.say(f"summary note {made['note_id']} ({len(made['blocks'])} blocks)")


def export(d: Demo) -> None:
    source = {"type": "note", "note_id": d.found["summary_note_id"]}
    jobs = [d.export(source, fmt, f"summary.{fmt}", f"summary ({fmt.upper()})", {}) for fmt in ("html", "pdf", "docx")]
    d.step.details["job_ids"] = jobs


def theme(d: Demo) -> None:
    package = media.theme_package(d.out / f"{media.THEME_ID}.zip")
    d.output(package.name, "theme package (§11.1 zip)")
    seen = d.call("themes/inspect", {"path": str(package)})
    if not seen["compatible"]:
        raise StepFailed("THEME_INCOMPATIBLE", "the sidecar finds the theme incompatible", {"inspection": seen})
    preview = d.call("themes/preview", {"package_id": seen["package_id"]})
    d.write("theme-preview.png", base64.b64decode(preview["data_base64"]), "theme preview")
    installed = d.call("themes/install", {"package_id": seen["package_id"]})
    enabled = d.call("themes/enable", {"theme_id": installed["theme_id"]})
    d.say(f"theme {installed['theme_id']} {installed['version']} installed and enabled={enabled['enabled']}")
    job = d.export(
        {"type": "note", "note_id": d.found["summary_note_id"]},
        "html",
        "summary-themed.html",
        f"summary (HTML, theme {media.THEME_ID})",
        {"theme_id": installed["theme_id"]},
    )
    themed = (d.out / "summary-themed.html").read_text(encoding="utf-8")
    d.step.details.update(
        theme_id=installed["theme_id"], package_id=seen["package_id"], job_ids=[job], warnings=seen.get("warnings")
    )
    if media.THEME_ACCENT not in themed:
        raise StepFailed("THEME_NOT_APPLIED", "the themed HTML does not carry the theme's CSS")


def benchmark(d: Demo) -> None:
    from sidecar.benchmarks.models import BenchmarkReport
    from sidecar.benchmarks.report import render_html

    run = d.call("benchmarks/rag/runs/create", {"dataset_id": "rag-core-v1"}, timeout=120)
    d.step.details["run_id"] = run["run_id"]
    d.say(f"run {run['run_id']} on rag-core-v1 ({run['dataset_hash'][:12]})")
    d.client.follow(run["run_id"], timeout=600)
    report = d.call("benchmarks/runs/report", {"run_id": run["run_id"]}, timeout=120)
    d.write("benchmark.json", json.dumps(report, indent=2, ensure_ascii=False), "benchmark report (JSON)")
    d.write("benchmark.html", render_html(BenchmarkReport.model_validate(report)), "benchmark report (HTML)")
    metrics = report.get("metrics") or {}
    d.step.details.update(status=report["run"]["status"], cases=len(report["cases"]), failures=len(report["failures"]),
                          metrics=metrics)  # fmt: skip
    d.say(f"{len(report['cases'])} case results, {len(report['failures'])} failures")
    if report["run"]["status"] != "completed":
        error = report["run"]["error"]
        raise StepFailed("BENCHMARK_FAILED", f"the run ended {report['run']['status']}", {"error": error})


DOC_FACT = "The Metona X1 warranty lasts 36 months from the date of purchase, parts and labour included."
DOC_QUESTION = "How long is the warranty of the Metona X1?"
DOC_CALL = {"name": SEARCH_TOOL, "arguments": {"query": "Metona X1 warranty months"}}


def brief_markdown() -> str:
    """A three-section product brief whose warranty sentence lands past the first page of its PDF."""
    features = [
        ("capture", "records meetings and lectures, transcribes them offline and keeps every speaker's turn"),
        ("search", "finds a passage in notes, transcripts and imported documents by its words or its meaning"),
        ("agents", "answers questions from the notes, calls the user's plugins and cites where each answer came from"),
        ("export", "writes HTML, PDF and DOCX with diagrams, formulas and the user's theme"),
    ]
    overview = "\n\n".join(
        f"The Metona X1 {what}: it {does}. " * 4 + "Nothing leaves the machine unless the user says so."
        for what, does in features * 3
    )
    rows = "\n".join(f"| {what} | {does[:40]} |" for what, does in features)
    return (
        "# Metona X1 product brief\n\n## 1 Overview\n\n" + overview
        + "\n\n## 2 Specifications\n\n| part | what it does |\n|---|---|\n" + rows
        + "\n\n## 3 Warranty and service\n\n" + DOC_FACT
        + " Repairs are free of charge within that period; after it, the service centre quotes each repair first.\n"
    )


def document(d: Demo) -> None:
    """A PDF the user already has (built here through the sidecar's own PDF export) is imported as a cited note;
    a search finds the warranty sentence with its page, and the agent answers from it, citing the page."""
    d.export({"type": "markdown", "markdown": brief_markdown(), "title": "Metona X1 product brief"}, "pdf",
             "brief.pdf", "a PDF to import (the product brief)", {})  # fmt: skip
    attachment = d.call("attachments/import", {"path": str(d.out / "brief.pdf")})["attachment_id"]
    job = d.call("documents/imports/create", {"attachment_id": attachment, "folder": "Documents"})
    d.client.follow(job["job_id"], timeout=300)
    done = d.call("documents/imports/get", {"job_id": job["job_id"]})
    d.step.details.update(job_id=job["job_id"], attachment_id=attachment, status=done["status"],
                          pages=done["pages"], ocr_pages=done["ocr_pages"], note_id=done["note_id"])  # fmt: skip
    if done["status"] != "completed":
        raise StepFailed("DOCUMENT_IMPORT_FAILED", f"the import ended {done['status']}", {"job": done})
    d.say(f"note {done['note_id']}: {done['block_count']} blocks from {done['pages']} pages")
    found = d.call("search/query", {"query": "how long is the Metona X1 warranty", "mode": "hybrid", "top_k": 3},
                   timeout=120)  # fmt: skip
    hit = next((h for h in found["items"] if h["note_id"] == done["note_id"] and "36 months" in h["text"]), None)
    page = next((c.get("page") for c in (hit or {}).get("citations") or [] if c.get("page")), None)
    if hit is None or page is None:
        raise StepFailed("DOCUMENT_SEARCH_MISSED", "the warranty sentence was not found with its page", {"hits": found})
    d.step.details["search_page"] = page
    d.say(f"hybrid search: the warranty sentence on page {page} of {done['pages']}")

    provider = d.provider
    question = f"{DOC_QUESTION}\nReply with this tool call, then you get its result:\n" \
               f"<tool_call>\n{json.dumps(DOC_CALL)}\n</tool_call>"  # fmt: skip
    if provider["kind"] == "local":
        # the local model's own tool decision (constrained, the default): measured, the text path echoed the search
        # result as its answer ("knowledge_search(...) returned: 5 passages ...") where this one answers from it
        made = d.call("providers/create", {"preset": "local", "provider_id": "demo-local-documents"})
        provider, question = {"id": made["provider_id"], "kind": "local"}, DOC_QUESTION
    elif provider["kind"] == "mock":
        turns = [{"tool_calls": [{"id": "c1", "name": SEARCH_TOOL, "args": DOC_CALL["arguments"]}]},
                 {"text": f"{DOC_FACT} (Metona X1 product brief, page {page})"}]  # fmt: skip
        made = d.call("providers/create", {"preset": "mock", "provider_id": "demo-doc-mock",
                                           "options": {"script": {"turns": turns}}})  # fmt: skip
        provider = {"id": made["provider_id"], "kind": "mock"}
    params = {"provider_id": provider["id"], "request": _request(question, role=DOC_ROLE), "allowed_tools": [SEARCH_TOOL],
              "max_iterations": 2}  # fmt: skip
    _run, final, events, _ = run_and_trace(d, params)
    cited = [
        {"note_id": e["data"].get("note_id"), "page": c.get("page"), "attachment_id": c.get("attachment_id")}
        for e in events if e["event"] == "Citation" and e["data"].get("note_id") == done["note_id"]
        for c in e["data"].get("citations") or [] if c.get("page")
    ]
    answer = final.get("output") or ""
    d.step.details.update(answer=answer, citations=cited, run_status=final["status"])
    d.say(f"answer: {answer[:160]!r}; cited pages {sorted({c['page'] for c in cited})}")
    if final["status"] != "completed":
        raise StepFailed("AGENT_RUN_NOT_COMPLETED", f"the run ended {final['status']}", {"error": final.get("error")})
    if not any(c["page"] == page for c in cited):
        raise StepFailed("DOCUMENT_NOT_CITED", f"the trace has no Citation of page {page} of the imported note",
                         {"citations": cited})  # fmt: skip


STEPS: list[tuple[str, tuple[str, ...], Callable[[Demo], None]]] = [
    ("transcribe", (), transcribe),
    ("note", ("transcribe",), note),
    ("search", ("note",), search),
    ("plugin", (), plugin),
    ("agent", ("search", "plugin"), agent),
    ("render", ("note",), render),
    ("export", ("render",), export),
    ("theme", ("export",), theme),  # after the plain exports: enabling a theme must not restyle them
    ("benchmark", (), benchmark),
    ("document", ("agent",), document),  # after the agent: the same provider, one model run at a time
]

PREPARE: dict[str, Callable[[Demo], None]] = {"agent": prepare_agent}


# -- the command --------------------------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="metona-sidecar demo", description=__doc__.split("\n\n")[0])
    p.add_argument("-o", "--output", type=Path, default=Path("demo-out"), help="output folder (default: demo-out)")
    p.add_argument("--binary", metavar="PATH", help="run this sidecar executable instead of `python -m sidecar`")
    p.add_argument(
        "--provider",
        metavar="PRESET",
        help="the agent's provider: a preset to configure (its key from METONA_LIVE_<PRESET>_API_KEY, e.g. "
        "METONA_LIVE_DEEPSEEK_API_KEY, sent only in providers/create)",
    )
    p.add_argument("--audio", help="transcribe this audio file instead of the espeak-ng meeting")
    p.add_argument("--keep", action="store_true", help="keep the sidecar's data directory for inspection")
    p.add_argument("--quiet", action="store_true", help="no progress lines, only the summary")
    return p


def key_variable(preset: str) -> str:
    """The variable ``--provider PRESET`` reads its key from (``METONA_LIVE_DEEPSEEK_API_KEY`` for deepseek)."""
    return KEY_VARIABLE.format(re.sub(r"[^A-Z0-9]", "_", preset.upper()))


def checkouts(binary: str | None) -> list[Path]:
    """The source checkouts whose setup (reference servers, prepared model) the demo may use, nearest first: the
    one this package runs from, then the one a binary was built in (``<checkout>/dist/metona/metona-sidecar``); when
    the demo runs inside the binary, only the latter (its package lives in the binary's bundle)."""
    found = [] if getattr(sys, "frozen", False) else [CHECKOUT]
    for exe in (binary, sys.executable if getattr(sys, "frozen", False) else None):
        if exe:
            found.append(engines.checkout_of(exe))
    return list(dict.fromkeys(found))


def time_server(roots: list[Path]) -> str | None:
    """``mcp-server-time``: a checkout's ``tools/mcp-ref/.venv`` (scripts/setup step 8), else on PATH. It runs on
    its own venv's interpreter (its shebang), whichever sidecar (package or binary) starts it."""
    for root in roots:
        if (root / TIME_SERVER).is_file():
            return str(root / TIME_SERVER)
    return shutil.which("mcp-server-time")


PYTHON_VARIABLES = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "VIRTUAL_ENV")
"""Left out of a binary's environment: they point into the demo's own interpreter and checkout."""


def _env(root: Path, binary: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not re.fullmatch(KEY_VARIABLE.format(".+"), k)}  # key: wire only
    if binary:
        env = {k: v for k, v in env.items() if k not in PYTHON_VARIABLES}
    env["METONA_DATA_DIR"] = str(root / "data")
    env["METONA_SECRET_KEY_FILE"] = str(root / "master.key")  # never the user's real key
    env.setdefault("METONA_LOCAL_PRECISION", "f32")  # greedy output the same on CPUs with and without bf16
    prepared = next((r / PREPARED_MODEL for r in checkouts(binary) if (r / PREPARED_MODEL).is_dir()), None)
    if "METONA_LOCAL_MODEL_DIR" not in env and prepared is not None:  # scripts/setup prepared it there
        env["METONA_LOCAL_MODEL_DIR"] = str(prepared)
    return env


def sidecar_command(binary: str | None) -> list[str]:
    """How the app starts the sidecar: ``--binary PATH`` (the packaged executable), the binary the demo
    itself runs in, else ``python -m sidecar`` on this interpreter."""
    if binary:
        path = Path(binary).expanduser().resolve()
        if not path.is_file() or not os.access(path, os.X_OK):
            raise WireError("SIDECAR_BINARY_NOT_FOUND", f"--binary {binary} is not an executable file")
        return [str(path)]
    if getattr(sys, "frozen", False):  # the binary running its own demo: it is the sidecar too
        return [sys.executable]
    return [sys.executable, "-m", "sidecar"]


def run_steps(demo: Demo, steps: list[Step], err: TextIO) -> None:
    """Run every step whose needs are ok, each on its own thread as soon as its needs are done: the independent
    ones (plugin, benchmark; render beside agent) overlap the model loads of the others. A step whose need failed
    or was skipped is skipped."""
    by_name = {s.name: s for s in steps}
    done = {s.name: threading.Event() for s in steps}
    demo.finished = done
    lock = threading.Lock()

    def line(text: str) -> None:
        with lock:
            err.write(text + "\n")
            err.flush()

    prepared: dict[str, threading.Thread] = {}
    failed_prepare: dict[str, Exception] = {}

    def prepare(step: Step) -> None:
        demo.step = step
        try:
            assert step.prepare is not None
            step.prepare(demo)
        except Exception as exc:  # raised again where the step runs
            failed_prepare[step.name] = exc

    def prepared_run(step: Step) -> None:
        if step.name in prepared:
            prepared[step.name].join()
        if step.name in failed_prepare:
            raise failed_prepare[step.name]
        step.run(demo)

    def run(i: int, step: Step) -> None:
        try:
            for need in step.needs:
                done[need].wait()
            blocked = [n for n in step.needs if by_name[n].status != "ok"]
            demo.step = step
            if blocked:
                step.details["reason"] = f"needs {', '.join(blocked)}"
            else:
                if not demo.ns.quiet:
                    line(f"demo [{i}/{len(steps)}] {step.name} …")
                started = time.perf_counter()
                try:
                    prepared_run(step)
                    step.status = "ok"
                except StepFailed as exc:
                    step.status, step.details["error"] = "failed", exc.error
                except WireError as exc:
                    step.status, step.details["error"] = "failed", exc.as_dict()
                except Exception as exc:  # a bug of the demo itself: the step fails, the others go on
                    step.status = "failed"
                    step.details["error"] = {"code": "DEMO_ERROR", "message": repr(exc), "details": {}}
                step.seconds = round(time.perf_counter() - started, 2)
            if not demo.ns.quiet or step.status == "failed":
                why = step.details.get("error") or step.details.get("reason")
                tail = f": {why['code']}: {why['message']}" if isinstance(why, dict) else (f": {why}" if why else "")
                line(f"demo [{i}/{len(steps)}] {step.name} {step.status} ({step.seconds:.1f} s){tail}")
        finally:
            done[step.name].set()

    for step in steps:
        if step.prepare is not None:
            prepared[step.name] = threading.Thread(target=prepare, args=(step,), name=f"demo-prepare-{step.name}")
            prepared[step.name].start()
    threads = [
        threading.Thread(target=run, args=(i, step), name=f"demo-{step.name}", daemon=True)
        for i, step in enumerate(steps, start=1)
    ]
    for thread in threads:
        thread.start()
    for thread in [*threads, *prepared.values()]:
        thread.join()


def _headline(step: Step) -> str:
    d = step.details
    if step.status != "ok":
        err = d.get("error")
        return f"{err['code']}: {err['message']}" if isinstance(err, dict) else str(d.get("reason", ""))
    cite = d.get("citation") or {}
    hybrid = (d.get("metrics") or {}).get("hybrid") or {}
    return {
        "transcribe": f"job {d.get('job_id')}: {d.get('segments')} segments, speakers {d.get('speakers')}",
        "note": f"note {d.get('note_id')}: {d.get('blocks')} blocks",
        "search": f"{cite.get('source_audio')} {cite.get('start_time', 0):.1f}–{cite.get('end_time', 0):.1f} s "
        f"{cite.get('speaker')}",
        "plugin": f"{d.get('plugin_id')}: {', '.join(d.get('tools') or [])}",
        "agent": f"run {d.get('run_id')}: tools {d.get('tools_called')}, cites note: {d.get('citation_found')}",
        "render": f"note {d.get('note_id')}",
        "export": f"jobs {', '.join(d.get('job_ids') or [])}",
        "theme": f"{d.get('theme_id')}, job {', '.join(d.get('job_ids') or [])}",
        "benchmark": f"run {d.get('run_id')}: hybrid hit@5 {hybrid.get('hit_at_5')}, hit@1 {hybrid.get('hit_at_1')}; "
        f"{d.get('failures')} failed of {d.get('cases')} case results",
    }.get(step.name, "")


def load_note(before: float, after: float) -> str:
    """The machine's 1-minute load average at the start and the end, beside its CPU count (times depend on it)."""
    return f"load average {before:.1f} → {after:.1f} on {os.cpu_count()} CPUs"


def print_summary(
    summary: dict[str, Any], steps: list[Step], out: Path, total: float, load: str, stdout: TextIO
) -> None:
    provider = summary["provider"]
    stdout.write(f"\nMetona demo — {'every step ok' if summary['ok'] else 'FAILED'} in {total:.1f} s ({load})\n")
    if provider["id"] is None:
        stdout.write("provider: none configured (the agent step did not run)\n")
    else:
        stdout.write(f"provider: {provider['id']} ({provider['kind']}, {provider['model']})\n")
    for s in steps:
        stdout.write(f"  {s.name:<10} {s.status:<7} {s.seconds:6.1f} s  {_headline(s)}\n")
    agent = next(s for s in steps if s.name == "agent")
    if agent.status == "ok" or agent.details.get("answer"):
        stdout.write(f"agent answer: {agent.details.get('answer', '')!r}\n")
    stdout.write(f"outputs: {out / 'index.html'}  {out / 'summary.json'}\n")
    stdout.write(f"data dir: {summary['data_dir']}{'' if Path(summary['data_dir']).exists() else ' (removed)'}\n")


def main(argv: list[str]) -> int:
    from .output import start_cli

    start_cli()
    ns = _parser().parse_args(argv)
    out: Path = ns.output.resolve()
    try:
        cmd = sidecar_command(ns.binary)
    except WireError as exc:
        sys.stderr.write(f"demo: {exc.code}: {exc.message}\n")
        return 2
    out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="metona-demo-"))
    (root / "data").mkdir()
    started, load_before = time.perf_counter(), os.getloadavg()[0]
    steps = [Step(name, needs, fn, PREPARE.get(name)) for name, needs, fn in STEPS]
    binary = cmd[0] if len(cmd) == 1 else None  # --binary, or the binary this demo runs in
    client = WireClient(cmd, _env(root, binary), root / "sidecar-stderr.log")
    provider: dict[str, Any] = {"id": None, "model": None, "kind": None}
    code = 0
    try:
        try:
            init = client.call("initialize", {"client_info": {"name": "metona-demo"}}, timeout=60)
        except WireError as exc:
            sys.stderr.write(f"demo: the sidecar did not start: {exc.code}: {exc.message}\n")
            for step in steps:
                step.status, step.details["error"] = "failed", exc.as_dict()
            code = 2
        else:
            if not ns.quiet:
                sys.stderr.write(f"demo: sidecar pid {init['pid']}, data dir {init['data_dir']}, output {out}\n")
            demo = Demo(ns, out, client, init)
            run_steps(demo, steps, sys.stderr)
            provider = demo.provider
    finally:
        exit_code = client.close()
        shutil.copyfile(root / "sidecar-stderr.log", out / "sidecar-stderr.log")
        if not ns.keep:
            shutil.rmtree(root, ignore_errors=True)
    labels = {"sidecar-stderr.log": "the sidecar's log (stderr)"}
    if code == 0:
        labels.update(demo.labels)
    summary = {
        "ok": all(s.status == "ok" for s in steps),
        "data_dir": str(root / "data"),
        "provider": provider,
        "steps": [
            {"name": s.name, "status": s.status, "seconds": s.seconds, "outputs": s.outputs, "details": s.details}
            for s in steps
        ],
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (out / "index.html").write_text(media.index_page(summary, labels), encoding="utf-8")
    total = time.perf_counter() - started
    print_summary(summary, steps, out, total, load_note(load_before, os.getloadavg()[0]), sys.stdout)
    if client.bad_lines:
        sys.stderr.write(f"demo: the sidecar wrote {client.bad_lines} non-JSON line(s) on its stdout\n")
    if exit_code != 0:
        sys.stderr.write(f"demo: the sidecar exited with {exit_code}\n")
    if code:
        return code
    return 0 if summary["ok"] and exit_code == 0 and not client.bad_lines else 1
