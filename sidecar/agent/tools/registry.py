"""The tool registry: named tools, their IR declarations, and the one place a tool call is executed.

``execute`` never raises for anything a tool or the model did wrong: every outcome becomes a ``MetonaToolResult``
(the model reads ``summary``; ``result`` is kept for audit) plus an ``error_code`` for the trace. Only
cancellation propagates, so stopping a run stops its tool at once.

The declaration is derived from the tool's pydantic ``Params`` (``model_json_schema``) and squeezed into the IR's
small JSON Schema dialect (``MetonaToolParams``): ``$ref`` resolved, ``Optional`` unwrapped, ``Literal``/enums as
string ``enum``, ``integer`` as ``number`` (the IR has no integer type; validation still wants an int, so the
description says "integer"), nested models as ``object``. Defaults and bounds the IR cannot carry are appended
to the field's description, so the model still sees them.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python

from sidecar.core.errors import BadRequestError, ConflictError
from sidecar.ir import MetonaParamField, MetonaToolCall, MetonaToolDef, MetonaToolParams, MetonaToolResult
from sidecar.ir.tools import MetonaParamType

from .base import Tool, ToolContext, ToolError

logger = logging.getLogger(__name__)

MAX_SUMMARY_CHARS = 16_000
"""The most a tool result may put into the model's context."""
MAX_LISTED_ERRORS = 8
MAX_LISTED_TOOLS = 30
_SEGMENT = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

UNKNOWN_TOOL = "UNKNOWN_TOOL"
INVALID_ARGUMENTS = "INVALID_ARGUMENTS"
TOOL_TIMEOUT = "TOOL_TIMEOUT"
TOOL_UNAVAILABLE = "TOOL_UNAVAILABLE"
TOOL_INTERNAL_ERROR = "TOOL_INTERNAL_ERROR"


@dataclass
class ToolExecution:
    """The outcome of one tool call."""

    result: MetonaToolResult
    error_code: str | None
    """``None`` on success; else ``ToolError.code`` or one of the registry's codes (``UNKNOWN_TOOL``, ...)."""
    invalid_arguments: bool
    """True when the call itself was invalid (unknown tool, arguments that fail validation): benchmarks count it."""
    citations: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Entry:
    tool: Tool
    definition: MetonaToolDef


class ToolRegistry:
    """Tools by name, in registration order. Names are ``name`` or ``namespace.name`` (MCP: ``plugin.tool``)."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def register(self, tool: Tool, *, namespace: str | None = None) -> None:
        base_name = str(getattr(tool, "name", ""))
        name = f"{namespace}.{base_name}" if namespace is not None else base_name
        _check_name(name)
        if name in self._entries:
            raise ConflictError(f"a tool named {name!r} is already registered", code="TOOL_ALREADY_REGISTERED")
        self._entries[name] = _Entry(tool, tool.declaration(name) or build_definition(tool, name))

    def unregister(self, name: str) -> bool:
        return self._entries.pop(name, None) is not None

    def replace_namespace(self, namespace: str, tools: list[Tool]) -> list[str]:
        """Publish ``tools`` as ``namespace.<name>`` in place of the namespace's current ones: all or none
        (a bad name or declaration, or a duplicate, raises before anything changes). The new names, in order."""
        prefix = f"{namespace}."
        built: dict[str, _Entry] = {}
        for tool in tools:
            name = f"{prefix}{getattr(tool, 'name', '')}"
            _check_name(name)
            if name in built:
                raise ConflictError(f"a tool named {name!r} is already registered", code="TOOL_ALREADY_REGISTERED")
            built[name] = _Entry(tool, tool.declaration(name) or build_definition(tool, name))
        kept = {n: e for n, e in self._entries.items() if not n.startswith(prefix)}
        self._entries = {**kept, **built}
        return list(built)

    def remove_namespace(self, namespace: str) -> list[str]:
        """Unregister every ``namespace.*`` tool; the names removed."""
        prefix = f"{namespace}."
        gone = [n for n in self._entries if n.startswith(prefix)]
        for name in gone:
            del self._entries[name]
        return gone

    def get(self, name: str) -> Tool | None:
        entry = self._entries.get(name)
        return entry.tool if entry else None

    def names(self) -> list[str]:
        return list(self._entries)

    def definition(self, name: str) -> MetonaToolDef:
        entry = self._entries.get(name)
        if entry is None:
            raise KeyError(name)
        return entry.definition

    def definitions(self, allowed: Collection[str] | None = None) -> list[MetonaToolDef]:
        return [e.definition for n, e in self._entries.items() if allowed is None or n in allowed]

    def unavailable(self, ctx: ToolContext) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, entry in self._entries.items():
            reason = _unavailable_reason(entry.tool, ctx)
            if reason is not None:
                out[name] = reason
        return out

    def check(self, call: MetonaToolCall, ctx: ToolContext) -> ToolExecution | None:
        """The failed result ``call`` would get without running (unknown tool, unavailable, invalid arguments), or
        ``None``: lets the loop refuse a bad call before it asks the user's permission for it."""
        prepared = self._prepare(call, ctx, time.perf_counter())
        return prepared if isinstance(prepared, ToolExecution) else None

    def _prepare(self, call: MetonaToolCall, ctx: ToolContext, started: float) -> ToolExecution | tuple[Tool, Any]:
        entry = self._entries.get(call.name)
        if entry is None:
            return _failure(call, started, UNKNOWN_TOOL, self._unknown_message(call.name), invalid=True)
        tool = entry.tool
        reason = _unavailable_reason(tool, ctx)
        if reason is not None:
            return _failure(call, started, TOOL_UNAVAILABLE, f"the tool is unavailable: {reason}")
        try:
            return tool, tool.parse_args(call.args)
        except ValidationError as exc:
            error = f"invalid arguments: {describe_validation_error(exc)}"
            return _failure(call, started, INVALID_ARGUMENTS, error, invalid=True)
        except ToolError as exc:  # a tool validating against its own JSON Schema (MCP)
            return _failure(call, started, INVALID_ARGUMENTS, exc.message, invalid=True)

    async def execute(self, call: MetonaToolCall, ctx: ToolContext) -> ToolExecution:
        started = time.perf_counter()
        prepared = self._prepare(call, ctx, started)
        if isinstance(prepared, ToolExecution):
            return prepared
        tool, args = prepared
        timeout_s = tool.timeout_ms / 1000 if tool.timeout_ms > 0 else None
        scope = None
        try:
            with anyio.fail_after(timeout_s) as scope:
                output = await tool.run(args, ctx)
            raw = to_jsonable_python(output.result)
            citations = [to_jsonable_python(c) for c in output.citations]
            summary = str(output.summary)
        except anyio.get_cancelled_exc_class():
            raise
        except ToolError as exc:
            return _failure(call, started, exc.code, exc.message)
        except TimeoutError:
            if scope is not None and scope.cancelled_caught:
                return _failure(call, started, TOOL_TIMEOUT, f"the tool did not finish within {tool.timeout_ms} ms")
            logger.exception("tool %s raised TimeoutError (call %s)", call.name, call.id)
            return _failure(call, started, TOOL_INTERNAL_ERROR, "the tool failed with an internal error")
        except Exception:
            logger.exception("tool %s failed (call %s)", call.name, call.id)
            return _failure(call, started, TOOL_INTERNAL_ERROR, "the tool failed with an internal error")
        result = MetonaToolResult(
            tool_call_id=call.id,
            tool_name=call.name,
            result=raw,
            summary=cap_summary(summary),
            success=True,
            duration_ms=_elapsed_ms(started),
            timestamp=_now_ms(),
        )
        return ToolExecution(result=result, error_code=None, invalid_arguments=False, citations=citations)

    def _unknown_message(self, name: str) -> str:
        known = self.names()
        listed = ", ".join(known[:MAX_LISTED_TOOLS]) + (", ..." if len(known) > MAX_LISTED_TOOLS else "")
        return f"unknown tool {name[:100]!r}; available tools: {listed or '(none)'}"


def cap_summary(text: str) -> str:
    """``text`` cut to at most :data:`MAX_SUMMARY_CHARS`, with a note saying how much was kept."""
    if len(text) <= MAX_SUMMARY_CHARS:
        return text
    note = f"[truncated: {MAX_SUMMARY_CHARS} of {len(text)} chars]"
    keep = MAX_SUMMARY_CHARS - len(note) - 1
    return f"{text[:keep]}\n[truncated: {keep} of {len(text)} chars]"


def describe_validation_error(exc: ValidationError) -> str:
    """A short, model-readable list of what is wrong with the arguments (no input values echoed)."""
    problems: list[str] = []
    for err in exc.errors(include_url=False, include_input=False, include_context=False):
        loc = ".".join(str(part) for part in err["loc"]) or "(arguments)"
        problems.append(f"{loc}: {err['msg']}")
    shown = problems[:MAX_LISTED_ERRORS]
    more = f"; and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
    return "; ".join(shown) + more


def _failure(call: MetonaToolCall, started: float, code: str, error: str, *, invalid: bool = False) -> ToolExecution:
    result = MetonaToolResult(
        tool_call_id=call.id,
        tool_name=call.name,
        result=None,
        summary=cap_summary(f"{call.name[:100]} failed: {error}"),
        success=False,
        error=cap_summary(error),  # a tool's error message is as unbounded as its summary
        duration_ms=_elapsed_ms(started),
        timestamp=_now_ms(),
    )
    return ToolExecution(result=result, error_code=code, invalid_arguments=invalid, citations=[])


def _unavailable_reason(tool: Tool, ctx: ToolContext) -> str | None:
    try:
        return tool.unavailable_reason(ctx)
    except Exception:
        logger.exception("unavailable_reason of tool %s failed", tool.name)
        return "the tool could not check its prerequisites"


def _elapsed_ms(started: float) -> int:
    return max(0, round((time.perf_counter() - started) * 1000))


def _now_ms() -> int:
    return int(time.time() * 1000)


def _check_name(name: str) -> None:
    segments = name.split(".")
    if len(segments) > 2 or not all(_SEGMENT.match(s) for s in segments):
        raise BadRequestError(
            f"invalid tool name {name[:100]!r}: letters, digits, '_' and '-' (1-64), at most one '.'",
            code="TOOL_NAME_INVALID",
        )


# --- declaration -----------------------------------------------------------------------------------------------


def build_definition(tool: Tool, name: str | None = None) -> MetonaToolDef:
    """The IR declaration of ``tool`` (under ``name``, default ``tool.name``). Raises ``BadRequestError``."""
    label = getattr(tool, "name", type(tool).__name__)
    missing = [a for a in ("name", "description", "Params", "category", "risk_level") if not hasattr(tool, a)]
    if missing:
        raise BadRequestError(f"tool {label!r} does not declare {', '.join(missing)}", code="TOOL_DEFINITION_INVALID")
    if not str(tool.description).strip():
        raise BadRequestError(f"tool {label!r} needs a description", code="TOOL_DEFINITION_INVALID")
    if tool.requires_permission and not tool.permission:
        raise BadRequestError(f"tool {label!r} requires permission but names none", code="TOOL_PERMISSION_MISSING")
    if not (isinstance(tool.Params, type) and issubclass(tool.Params, BaseModel)):
        raise _schema_error(tool, "Params is not a pydantic model")
    params = params_schema(tool)
    try:
        return MetonaToolDef(
            name=name or tool.name,
            description=tool.description,
            parameters=params,
            category=tool.category,
            risk_level=tool.risk_level,
            requires_permission=tool.requires_permission,
            timeout_ms=tool.timeout_ms,
            examples=list(tool.examples) or None,
        )
    except ValidationError as exc:
        raise BadRequestError(
            f"tool {label!r} is not declared correctly: {describe_validation_error(exc)}",
            code="TOOL_DEFINITION_INVALID",
        ) from None


def params_schema(tool: Tool) -> MetonaToolParams:
    try:
        schema = tool.Params.model_json_schema()
    except Exception as exc:
        raise _schema_error(tool, f"no JSON schema ({exc})") from exc
    defs: dict[str, Any] = schema.get("$defs", {})
    required = list(schema.get("required", []))
    properties: dict[str, MetonaParamField] = {}
    for key, prop in schema.get("properties", {}).items():
        try:
            properties[key] = param_field(prop, defs, top=True)
        except ValueError as exc:
            raise _schema_error(tool, f"parameter {key!r}: {exc}") from exc
    return MetonaToolParams(properties=properties, required=required or None)


def _schema_error(tool: Tool, why: str) -> BadRequestError:
    return BadRequestError(
        f"the parameters of tool {tool.name!r} cannot be declared: {why}", code="TOOL_SCHEMA_INVALID"
    )


_SIMPLE = {"string": "string", "number": "number", "integer": "number", "boolean": "boolean"}


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """``node`` with ``$ref`` (and a one-element ``allOf``) replaced by the definition, outer keys winning."""
    for _ in range(20):
        if "$ref" in node:
            ref = node["$ref"]
            target = defs.get(ref.rsplit("/", 1)[-1]) if ref.startswith("#/$defs/") else None
            if target is None:
                raise ValueError(f"unresolvable reference {ref}")
            node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        elif isinstance(node.get("allOf"), list) and len(node["allOf"]) == 1:
            node = {**node["allOf"][0], **{k: v for k, v in node.items() if k != "allOf"}}
        else:
            return node
    raise ValueError("reference chain too deep")


def _unwrap_optional(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    options = node.get("anyOf") or node.get("oneOf")
    if not isinstance(options, list):
        return node
    rest = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
    kept = [_resolve(o, defs) for o in options if o.get("type") != "null"]
    if len(kept) == 1:
        return {**kept[0], **rest}
    kinds = {_kind(o) for o in kept}
    if len(kinds) == 1 and "number" in kinds:  # int | float
        return {**rest, "type": "number"}
    many = [o for o in kept if _kind(o) == "array" and isinstance(o.get("items"), dict)]
    for array in many:  # one or many: X | array of X is the array (one item is one), whatever else the union has
        item = _bare(_resolve(array["items"], defs))
        if any(o is not array and _bare(o) == item for o in kept):
            return {**array, **{k: v for k, v in rest.items() if k != "default"}}
    literals = [o for o in kept if _values(o)]
    others = [o for o in kept if not _values(o)]
    named = [v for o in literals for v in _values(o) or ()]
    if len(others) == 1 and named and _kind(others[0]) in ("number", "string", "boolean"):
        # a value or a named one: int | Literal["all"] (a container's log tail) is the value, its names a hint
        if any(re.search(r"[,|()]", json.dumps(v, ensure_ascii=False)) for v in named):
            raise ValueError("a named value that a hint cannot carry")
        return {**others[0], **rest, _NAMED: named}
    raise ValueError("a union of different types is not expressible")


_NAMED = "x-named-values"
"""The key :func:`_unwrap_optional` keeps a union's named values under (``int | Literal["all"]``), for
:func:`_hints` to write as ``or "all"``."""


def _bare(node: dict[str, Any]) -> dict[str, Any]:
    """A schema without its words (what "X" of "X | array of X" must be to be one item of the array)."""
    return {k: v for k, v in node.items() if k not in ("description", "title", "default", "examples")}


def _kind(node: dict[str, Any]) -> str:
    raw = node.get("type")
    if isinstance(raw, str) and raw in _SIMPLE:
        return _SIMPLE[raw]
    if raw in ("object", "array"):
        return raw
    if "properties" in node:
        return "object"
    if "enum" in node or "const" in node:
        return _kind_of(_values(node)) or "string"
    raise ValueError(f"type {raw!r} is not expressible")


def param_field(prop: dict[str, Any], defs: dict[str, Any], *, top: bool = False, depth: int = 0) -> MetonaParamField:
    if depth > 8:
        raise ValueError("nested too deeply")
    node = _unwrap_optional(_resolve(prop, defs), defs)
    kind = _kind(node)
    enum = _enum(node, kind)
    description = node.get("description") or ""
    if top and not description.strip():
        raise ValueError("needs a description (Field(description=...))")
    items = None
    if kind == "array" and isinstance(node.get("items"), dict):
        items = param_field(node["items"], defs, depth=depth + 1)
    properties, required = _object_fields(node, defs, depth) if kind == "object" else (None, None)
    hints = _hints(node, kind)
    text = description.strip() or node.get("title") or kind
    if hints:
        text = f"{text} ({', '.join(hints)})"
    return MetonaParamField(
        type=cast(MetonaParamType, kind),
        description=text,
        enum=enum,
        items=items,
        properties=properties,
        required=required,
    )


def _object_fields(
    node: dict[str, Any], defs: dict[str, Any], depth: int
) -> tuple[dict[str, MetonaParamField] | None, list[str] | None]:
    """An object's declared keys as fields (the IR extension ``properties``/``required``), so a nested schema
    reaches the model and the local provider's decoder whole. An optional key whose schema the IR cannot express
    (a union of types) is left out (the tool applies its default); a required one fails the whole field."""
    raw = node.get("properties")
    if not isinstance(raw, dict) or not raw:
        return None, None
    needed = [r for r in node.get("required") or () if isinstance(r, str) and r in raw]
    fields: dict[str, MetonaParamField] = {}
    for key, sub in raw.items():
        try:
            fields[str(key)] = param_field(sub if isinstance(sub, dict) else {}, defs, depth=depth + 1)
        except ValueError:
            if key in needed:
                raise
    return fields or None, [r for r in needed if r in fields] or None


def _values(node: dict[str, Any]) -> list[Any] | None:
    """The values an ``enum`` or a ``const`` allows; None where the node declares neither."""
    values = node["enum"] if "enum" in node else [node["const"]] if "const" in node else None
    return list(values) if isinstance(values, list) else None


def _kind_of(values: list[Any] | None) -> str | None:
    """``boolean`` or ``number`` when the values are all of that kind (and there are some), else None."""
    if not values:
        return None
    if all(isinstance(v, bool) for v in values):
        return "boolean"
    return "number" if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values) else None


def _enum(node: dict[str, Any], kind: str) -> list[str] | None:
    """The IR's ``enum`` (strings only). The choices of a ``number`` field (an integer enum: a plugin's
    ``num_passengers`` of 1–5) go into its description's hints (:func:`_hints`: ``one of 1|2|3``), and a
    ``boolean`` field's need no list: as a string enum the choices were a free string, and a plugin was sent
    ``"2"`` or ``"{4}"`` for a number of passengers."""
    values = _values(node)
    if values is None:
        return None
    if kind in ("number", "boolean") and (not values or _kind_of(values) == kind):
        return None
    if not all(isinstance(v, str) for v in values):
        raise ValueError("only string, number or boolean enums/literals are expressible")
    return values


SHORT_STRING = 1000
"""A string's ``maxLength`` up to which the field's description says it (``at most 500 characters``): what a model
writing the value should heed, and what bounds the local model's token budget for a call (a file's path or content
is bounded far beyond anything written by hand, and the hint would be noise)."""


def _hints(node: dict[str, Any], kind: str) -> list[str]:
    """What the IR field cannot carry but the model should know: integer-ness, a number's choices, a union's named
    values, bounds, a string's or an array's most length, nested keys, default."""
    hints: list[str] = []
    if node.get("type") == "integer":
        hints.append("integer")
    values = _values(node)
    if kind == "number" and values and _kind_of(values) == "number":
        hints.append("one of " + "|".join(str(v) for v in values))
    if node.get(_NAMED):  # the named values of a union with the field's type: or "all"
        hints.append("or " + "|".join(json.dumps(v, ensure_ascii=False) for v in node[_NAMED]))
    if "minimum" in node and "maximum" in node:
        hints.append(f"{node['minimum']}-{node['maximum']}")
    else:
        for key, label in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<")):
            if key in node:
                hints.append(f"{label} {node[key]}")
    if "maxItems" in node:
        hints.append(f"at most {node['maxItems']} items")
    most = node.get("maxLength")
    if kind == "string" and isinstance(most, int) and not isinstance(most, bool) and most <= SHORT_STRING:
        hints.append(f"at most {most} characters")
    if kind == "object" and isinstance(node.get("properties"), dict) and node["properties"]:
        hints.append("keys: " + ", ".join(node["properties"]))
    if node.get("default") is not None:
        hints.append(f"default {_show(node['default'])}")
    return hints


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)
