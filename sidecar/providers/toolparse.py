"""The parse-priority chain's last step, shared by every adapter (IR: tool calling → ``json_object`` → regex fallback).

A model that has no native tool calling (the embedded local model; an Ollama model without the ``tools``
capability) writes its calls as text: Qwen/Hermes ``<tool_call>{…}</tool_call>`` tags, a bare JSON object, or a
fenced ```json block. :func:`parse_tool_text` finds those candidates and accepts one only when it names an
offered tool and its arguments are valid against that tool's JSON schema; anything else stays text.

:class:`ToolTextFallback` does the same on a stream (through :meth:`StreamAssembler.tool_fallback`): plain prose
is forwarded as it arrives, and from the first thing that may open a call (``{`` or ``[`` at the start of a line,
a fence, a tag) the text is held back, then parsed at the end into tool calls or released as text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..ir import MetonaToolDef

_TAG_OPEN = "<tool_call>"
_TAG_CLOSE = "</tool_call>"
_TAG_RE = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.S)
_FENCE_RE = re.compile(r"```[ \t]*(?:json|JSON|tool_call|tool)?[ \t]*\n?(.*?)(?:```|\Z)", re.S)
_NAME_KEYS = ("name", "tool", "tool_name", "function")
_ARG_KEYS = ("arguments", "parameters", "args", "input")


@dataclass(frozen=True)
class TextToolCall:
    name: str
    args: dict[str, Any]


@dataclass
class ToolParse:
    calls: list[TextToolCall] = field(default_factory=list)
    text: str = ""
    """The text outside the accepted calls (all of it when none was accepted)."""
    rejected: list[str] = field(default_factory=list)
    """Why candidates were not taken as calls (unknown tool, invalid arguments, malformed JSON)."""


def parse_tool_text(text: str, tools: Sequence[MetonaToolDef]) -> ToolParse:
    """Tool calls written as text: tagged first, then fenced, then bare JSON; only valid calls of offered tools."""
    result = ToolParse(text=text)
    if not tools or not text.strip():
        return result
    by_name = {t.name: t for t in tools}
    for finder in (_tagged, _fenced, _bare):
        spans = finder(text)
        if not spans:
            continue
        accepted: list[tuple[int, int]] = []
        for start, end, payload in spans:
            calls, why = _calls_from(payload, by_name)
            if calls:
                for call in calls:  # a small model repeats its call: the same call twice in one answer is one
                    if call not in result.calls:
                        result.calls.append(call)
                accepted.append((start, end))
            elif why:
                result.rejected.append(why)
        if accepted:
            kept, last = [], 0
            for start, end in accepted:
                kept.append(text[last:start])
                last = end
            kept.append(text[last:])
            result.text = "".join(kept).strip()
            return result
    return result


def _tagged(text: str) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end(), m.group(1)) for m in _TAG_RE.finditer(text)]


def _fenced(text: str) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end(), m.group(1)) for m in _FENCE_RE.finditer(text)]


def _bare(text: str) -> list[tuple[int, int, str]]:
    """JSON objects/arrays in the text: the whole text, or ones that start a line."""
    decoder = json.JSONDecoder()
    out: list[tuple[int, int, str]] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch in "{[" and (i == 0 or text[:i].strip() == "" or text[i - 1] == "\n"):
            try:
                _value, end = decoder.raw_decode(text, i)
            except (ValueError, RecursionError):
                out.append((i, n, text[i:]))  # malformed: reported as rejected, never a call
                break
            out.append((i, end, text[i:end]))
            i = end
            continue
        i += 1
    return out


def _calls_from(payload: str, by_name: dict[str, MetonaToolDef]) -> tuple[list[TextToolCall], str | None]:
    try:
        value = json.loads(payload)
    except (ValueError, RecursionError):
        return [], "malformed JSON"
    items = value if isinstance(value, list) else [value]
    calls: list[TextToolCall] = []
    for item in items:
        call, why = _call_from(item, by_name)
        if call is None:
            return [], why  # one bad call rejects the block: never run half of what the model meant
        calls.append(call)
    return calls, None


def _call_from(item: Any, by_name: dict[str, MetonaToolDef]) -> tuple[TextToolCall | None, str | None]:
    if not isinstance(item, dict):
        return None, "not a JSON object"
    if isinstance(item.get("function"), dict):  # OpenAI's {"type": "function", "function": {...}}
        item = item["function"]
    name = next((item[k] for k in _NAME_KEYS if isinstance(item.get(k), str)), None)
    if name is None:
        return None, "no tool name"
    tool = by_name.get(name)
    if tool is None:
        return None, f"{name!r} is not an offered tool"
    args: Any = next((item[k] for k in _ARG_KEYS if k in item), {})
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except (ValueError, RecursionError):
            return None, f"{name!r}: the arguments are not valid JSON"
    if not isinstance(args, dict):
        return None, f"{name!r}: the arguments are not a JSON object"
    why = schema_error(tool.parameters.model_dump(mode="json", by_alias=True, exclude_none=True), args)
    if why:
        return None, f"{name!r}: {why}"
    return TextToolCall(name, args), None


def schema_error(schema: dict[str, Any], value: Any) -> str | None:
    """Why ``value`` is not valid against the JSON schema ``schema`` (None when it is)."""
    import jsonschema

    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        error = jsonschema.exceptions.best_match(cls(schema).iter_errors(value))
    except jsonschema.exceptions.SchemaError as exc:
        return f"the tool's schema is invalid ({exc.message})"
    return None if error is None else f"invalid arguments: {error.message}"


def tool_prompt(tools: Sequence[MetonaToolDef]) -> str:
    """Tool definitions as system-prompt text for a model without native tool calling (the fallback's input)."""
    lines = [
        "# Tools",
        "You may call one of these tools. To call a tool, answer with only a JSON object of the form",
        '{"name": "<tool name>", "arguments": {<arguments>}} and nothing else. Otherwise answer normally.',
        "",
    ]
    for tool in tools:
        spec = {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters.model_dump(mode="json", by_alias=True, exclude_none=True),
        }
        lines.append(json.dumps(spec, ensure_ascii=False))
    return "\n".join(lines)


def call_text(name: str, args: dict[str, Any]) -> str:
    """A tool call as the text a model without tool support writes (its earlier turns in the history)."""
    return json.dumps({"name": name, "arguments": args}, ensure_ascii=False)


# ---- streaming ---------------------------------------------------------------------------------------------

_OPENERS = ("```", _TAG_OPEN, "{", "[")


class ToolTextFallback:
    """Stream text through the fallback: prose passes, possible calls are held and parsed at the end."""

    def __init__(self, tools: Sequence[MetonaToolDef], forward: Callable[[str], Awaitable[None]]) -> None:
        self.tools = list(tools)
        self._forward = forward
        self._held = ""
        self._holding = False
        self._line_start = True
        self.result: ToolParse | None = None

    async def feed(self, delta: str) -> None:
        if self._holding:
            self._held += delta
            return
        data = self._held + delta
        self._held = ""
        cut = self._opener(data)
        if cut is None and not data.strip():
            self._held = data  # whitespace: what follows decides whether it is prose or a call's lead-in
            return
        if cut is None:
            keep = self._maybe_opener_tail(data)
            out, self._held = (data[:-keep], data[-keep:]) if keep else (data, "")
            if out:
                self._line_start = out.endswith("\n") or (self._line_start and not out.strip())
                await self._forward(out)
            return
        if data[:cut].strip():
            await self._forward(data[:cut])
        self._holding = True
        self._held = data[cut:]

    def _opener(self, data: str) -> int | None:
        """Where something that may open a call begins (a fence or tag anywhere; JSON at a line start)."""
        best: int | None = None
        for token in ("```", _TAG_OPEN):
            i = data.find(token)
            if i >= 0 and (best is None or i < best):
                best = i
        line_start = self._line_start
        for i, ch in enumerate(data):
            if best is not None and i >= best:
                break
            if ch in "{[" and line_start:
                best = i
                break
            if ch == "\n":
                line_start = True
            elif not ch.isspace():
                line_start = False
        return best

    def _maybe_opener_tail(self, data: str) -> int:
        """Trailing characters that may be the start of a fence or a tag split across chunks."""
        for token in ("```", _TAG_OPEN):
            for n in range(min(len(token) - 1, len(data)), 0, -1):
                if token.startswith(data[-n:]):
                    return n
        return 0

    async def finish(self) -> list[TextToolCall]:
        """Parse what was held: the calls, after releasing any text that is not one."""
        held, self._held = self._held, ""
        if not self._holding:
            if held:
                await self._forward(held)
            self.result = ToolParse(text=held)
            return []
        result = parse_tool_text(held, self.tools)
        self.result = result
        if not result.calls:
            await self._forward(held)
            return []
        if result.text:
            await self._forward(result.text)
        return result.calls
