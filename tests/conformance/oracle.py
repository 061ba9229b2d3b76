"""An independent reading of a recorded answer: what the adapter must report (text, reasoning, tool calls, usage).

Deliberately naive and separate from the adapters (no shared code): it reads the body once as a whole, per
protocol, and stops where the stream stops being readable (an in-band error, a malformed item, the incomplete
tail of a cut stream). The suite compares the adapter's final MetonaResponse with it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .loopback import Recording


@dataclass
class Expected:
    text: str = ""
    reasoning: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_hit_tokens: int | None = None
    tool_call_ids: list[str | None] = field(default_factory=list)
    """The vendor's id of each tool call (None where the vendor gives none: Ollama)."""
    signature: str = ""
    """Anthropic: the thinking block's signature."""
    stopped: str | None = None
    """Why reading stopped early: "error" (in-band error), "malformed" or "cut"; None for a whole answer."""


def expect(protocol: str, recording: Recording, *, think_tags: bool = False) -> Expected:
    body = recording.body.decode("utf-8")
    if protocol == "anthropic":
        exp = _anthropic(body, recording)
    elif protocol == "ollama":
        exp = _ollama(body, recording)
    else:
        exp = _openai(body, recording)
    if recording.cut and exp.stopped is None:
        exp.stopped = "cut"
    if think_tags:
        _split_think_tags(exp)
    return exp


def _split_think_tags(exp: Expected) -> None:
    stripped = exp.text.lstrip()
    if not stripped.startswith("<think>"):
        return
    inner, sep, rest = stripped[len("<think>") :].partition("</think>")
    exp.reasoning += inner
    exp.text = rest.lstrip("\n") if sep else ""


# ---- framing -------------------------------------------------------------------------------------------------


def _complete_lines(body: str, recording: Recording) -> list[str]:
    """The lines of the body; the unterminated last line is dropped when the stream was cut."""
    lines = body.split("\n")
    tail = lines.pop()
    if tail and not recording.cut:
        lines.append(tail)
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _sse(body: str, recording: Recording) -> list[tuple[str, str]]:
    """(event, data) of each dispatched SSE event (an event without its blank line is dispatched only at a clean
    end of stream)."""
    events: list[tuple[str, str]] = []
    name, data = "", []
    for line in _complete_lines(body, recording):
        if not line:
            if data:
                events.append((name or "message", "\n".join(data)))
            name, data = "", []
            continue
        if line.startswith(":"):
            continue
        key, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if key == "data":
            data.append(value)
        elif key == "event":
            name = value
    if data and not recording.cut:
        events.append((name or "message", "\n".join(data)))
    return events


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


# ---- OpenAI Chat Completions (OpenAI, DeepSeek, Agnes) -----------------------------------------------------


def _openai(body: str, recording: Recording) -> Expected:
    exp = Expected()
    if not recording.stream:
        data = _loads(body)
        if not isinstance(data, dict):
            exp.stopped = "malformed"
            return exp
        message = (data.get("choices") or [{}])[0].get("message") or {}
        exp.text = message.get("content") or ""
        exp.reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
        for call in message.get("tool_calls") or []:
            fn = call.get("function") or {}
            exp.tool_calls.append((fn.get("name", ""), _loads(fn.get("arguments") or "{}") or {}))
            exp.tool_call_ids.append(call.get("id"))
        _openai_usage(exp, data.get("usage"))
        return exp
    calls: dict[int, list[Any]] = {}  # index → [name, arguments, id]
    for _event, data in _sse(body, recording):
        if data.strip() == "[DONE]":
            break
        obj = _loads(data)
        if not isinstance(obj, dict):
            exp.stopped = "malformed"
            break
        if obj.get("error"):
            exp.stopped = "error"
            break
        for choice in obj.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            exp.text += delta.get("content") or ""
            exp.reasoning += delta.get("reasoning_content") or delta.get("reasoning") or ""
            for tc in delta.get("tool_calls") or []:
                slot = calls.setdefault(tc.get("index", 0), ["", "", None])
                fn = tc.get("function") or {}
                if fn.get("name") and not slot[0]:
                    slot[0] = fn["name"]
                slot[1] += fn.get("arguments") or ""
                slot[2] = slot[2] or tc.get("id")
        _openai_usage(exp, obj.get("usage"))
    for index in sorted(calls):
        name, args, id_ = calls[index]
        exp.tool_calls.append((name, _loads(args) if args.strip() else {}))
        exp.tool_call_ids.append(id_)
    return exp


def _openai_usage(exp: Expected, usage: Any) -> None:
    if not isinstance(usage, dict):
        return
    exp.input_tokens = usage.get("prompt_tokens")
    exp.output_tokens = usage.get("completion_tokens")
    details = usage.get("completion_tokens_details") or {}
    if details.get("reasoning_tokens") is not None:
        exp.reasoning_tokens = details["reasoning_tokens"]
    if usage.get("prompt_cache_hit_tokens") is not None:  # DeepSeek
        exp.cache_hit_tokens = usage["prompt_cache_hit_tokens"]
    elif (usage.get("prompt_tokens_details") or {}).get("cached_tokens") is not None:  # OpenAI
        exp.cache_hit_tokens = usage["prompt_tokens_details"]["cached_tokens"]


# ---- Anthropic Messages (Anthropic, Agnes) ------------------------------------------------------------------


def _anthropic(body: str, recording: Recording) -> Expected:
    exp = Expected()
    if not recording.stream:
        data = _loads(body)
        if not isinstance(data, dict):
            exp.stopped = "malformed"
            return exp
        for block in data.get("content") or []:
            kind = block.get("type")
            if kind == "text":
                exp.text += block.get("text", "")
            elif kind == "thinking":
                exp.reasoning += block.get("thinking", "")
                exp.signature += block.get("signature", "")
            elif kind == "tool_use":
                exp.tool_calls.append((block.get("name", ""), block.get("input") or {}))
                exp.tool_call_ids.append(block.get("id"))
        usage = data.get("usage") or {}
        exp.input_tokens = usage.get("input_tokens")
        exp.output_tokens = usage.get("output_tokens")
        return exp
    blocks: dict[int, list[Any]] = {}
    for event, data in _sse(body, recording):
        obj = _loads(data)
        if not isinstance(obj, dict):
            exp.stopped = "malformed"
            break
        kind = obj.get("type") or event
        if kind == "error":
            exp.stopped = "error"
            break
        if kind == "message_start":
            usage = (obj.get("message") or {}).get("usage") or {}
            exp.input_tokens = usage.get("input_tokens", exp.input_tokens)
            exp.output_tokens = usage.get("output_tokens", exp.output_tokens)
        elif kind == "content_block_start":
            block = obj.get("content_block") or {}
            blocks[obj.get("index", 0)] = [block.get("type"), block.get("name", ""), "", block.get("id")]
            if block.get("type") == "text":
                exp.text += block.get("text", "")
            elif block.get("type") == "thinking":
                exp.reasoning += block.get("thinking", "")
                exp.signature += block.get("signature", "")
        elif kind == "content_block_delta":
            delta = obj.get("delta") or {}
            if delta.get("type") == "text_delta":
                exp.text += delta.get("text", "")
            elif delta.get("type") == "thinking_delta":
                exp.reasoning += delta.get("thinking", "")
            elif delta.get("type") == "input_json_delta":
                blocks.setdefault(obj.get("index", 0), ["tool_use", "", "", None])[2] += delta.get("partial_json", "")
            elif delta.get("type") == "signature_delta":
                exp.signature += delta.get("signature", "")
        elif kind == "message_delta":
            usage = obj.get("usage") or {}
            exp.output_tokens = usage.get("output_tokens", exp.output_tokens)
            if usage.get("input_tokens") is not None:
                exp.input_tokens = usage["input_tokens"]
    for index in sorted(blocks):
        kind, name, args, id_ = blocks[index]
        if kind == "tool_use":
            exp.tool_calls.append((name, _loads(args) if args.strip() else {}))
            exp.tool_call_ids.append(id_)
    return exp


# ---- Ollama /api/chat -----------------------------------------------------------------------------------------


def _ollama(body: str, recording: Recording) -> Expected:
    exp = Expected()
    if recording.stream:
        lines = [line for line in _complete_lines(body, recording) if line.strip()]
    else:
        lines = [body]
    for line in lines:
        obj = _loads(line)
        if not isinstance(obj, dict):
            exp.stopped = "malformed"
            break
        if obj.get("error"):
            exp.stopped = "error"
            break
        message = obj.get("message") or {}
        exp.text += message.get("content") or ""
        exp.reasoning += message.get("thinking") or ""
        for call in message.get("tool_calls") or []:
            fn = call.get("function") or {}
            args = fn.get("arguments")
            exp.tool_calls.append((fn.get("name", ""), _loads(args) if isinstance(args, str) else (args or {})))
            exp.tool_call_ids.append(call.get("id"))
        if obj.get("done"):
            exp.input_tokens = obj.get("prompt_eval_count")
            exp.output_tokens = obj.get("eval_count")
    return exp
