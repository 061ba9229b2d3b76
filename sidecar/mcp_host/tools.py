"""MCP tools as agent tools (phase-2 §7.1): ``tools/list`` entry → JSON Schema check → MetonaToolDef, and
ToolCall → ``tools/call`` → MCP content / error → ToolOutput.

An :class:`McpTool` is a registry :class:`~sidecar.agent.tools.base.Tool` whose arguments are validated against
the server's own JSON Schema (not a pydantic model) and whose declaration is converted from that schema into the
IR's small dialect (lenient where the IR cannot express a construct: the model still gets a readable hint, and
validation still uses the full schema).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from sidecar.agent.tools.base import Tool, ToolContext, ToolError, ToolOutput, ToolParams
from sidecar.agent.tools.registry import param_field
from sidecar.core.errors import BadRequestError
from sidecar.ir import MetonaParamField, MetonaRiskLevel, MetonaToolCategory, MetonaToolDef, MetonaToolParams

from .models import json_schema_problem

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_DESCRIPTION = 4000

CallFn = Callable[[str, dict[str, Any], "McpTool"], Awaitable[ToolOutput]]


class _NoParams(ToolParams):
    pass


class McpTool(Tool):
    """One tool of one plugin's MCP server, registered as ``<plugin_id>.<tool_name>``."""

    Params = _NoParams  # unused: :meth:`parse_args` validates against the server's schema

    def __init__(
        self,
        *,
        plugin_id: str,
        mcp_name: str,
        description: str,
        input_schema: dict[str, Any],
        risk: MetonaRiskLevel,
        timeout_ms: int,
        risk_rule: str = "manifest",
        call: CallFn,
        secrets: Sequence[str] = (),
        examples: Sequence[str] = (),
    ) -> None:
        import jsonschema

        self.name = mcp_name
        self.plugin_id = plugin_id
        self.mcp_name = mcp_name
        self.description = description
        self.input_schema = input_schema
        self.category = MetonaToolCategory.MCP
        self.risk_level = risk
        self.risk_rule = risk_rule
        """Which rule set ``risk_level`` (see :data:`RiskRule`); the trace records it."""
        self.requires_permission = risk not in (MetonaRiskLevel.SAFE, MetonaRiskLevel.LOW)
        self.permission = f"plugin.{plugin_id}.tools" if self.requires_permission else ""
        self.timeout_ms = timeout_ms
        self.examples = tuple(examples)
        self._call = call
        self._secrets = tuple(secrets)
        from referencing import Registry

        cls = jsonschema.validators.validator_for(input_schema, default=jsonschema.Draft202012Validator)
        # an empty registry: a $ref out of the schema is unresolvable, never fetched (jsonschema's default
        # registry still urlopen()s http(s) refs)
        self._validator = cls(input_schema, format_checker=cls.FORMAT_CHECKER, registry=Registry())

    def trace_secrets(self) -> Sequence[str]:
        return self._secrets  # the plugin's secrets its server was started with

    def declaration(self, name: str) -> MetonaToolDef:
        return MetonaToolDef(
            name=name,
            description=self.description,
            parameters=convert_schema(self.input_schema),
            category=self.category,
            risk_level=self.risk_level,
            requires_permission=self.requires_permission,
            timeout_ms=self.timeout_ms,
            examples=list(self.examples) or None,
        )

    def parse_args(self, args: dict[str, Any]) -> dict[str, Any]:
        from referencing.exceptions import Unresolvable

        try:
            if self._validator.is_valid(args):
                return args
            errors = sorted(self._validator.iter_errors(args), key=lambda e: list(e.absolute_path))
        except Unresolvable as exc:
            raise ToolError(
                f"the tool's input schema has a $ref that cannot be resolved: {str(exc)[:200]}",
                "MCP_TOOL_SCHEMA_INVALID",
            ) from None
        if errors:
            shown = []
            for err in errors[:8]:
                where = ".".join(str(p) for p in err.absolute_path) or "(arguments)"
                shown.append(f"{where}: {err.message[:200]}")
            more = f"; and {len(errors) - 8} more" if len(errors) > 8 else ""
            raise ToolError("invalid arguments: " + "; ".join(shown) + more, "INVALID_ARGUMENTS")
        return args

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutput:
        return await self._call(self.mcp_name, args, self)


def check_tool(tool: Any) -> str | None:
    """Why an MCP ``Tool`` cannot be published (its name or input schema), or ``None``."""
    if not TOOL_NAME.match(tool.name or ""):
        return f"tool name {str(tool.name)[:80]!r} is not 1-64 of [A-Za-z0-9_-]"
    schema = tool.input_schema
    problem = json_schema_problem(schema)
    if problem:
        return f"tool {tool.name!r}: invalid input schema: {problem}"
    if schema.get("type") != "object":
        return f"tool {tool.name!r}: the input schema must be of type object"
    return None


RiskRule = str
"""Which rule set a tool's risk (recorded in the trace): ``manifest`` (the plugin's ``tools.risk``),
``trusted_annotations`` (the server's own hints, because the user trusts this plugin's annotations),
``destructive_hint`` (an untrusted hint may raise the risk, never lower it) or ``default`` (medium: ask)."""


def tool_risk(
    tool: Any, overrides: Mapping[str, str], *, annotations_trusted: bool = False
) -> tuple[MetonaRiskLevel, RiskRule]:
    """The tool's risk and the rule that set it.

    A server's annotations are hints, not trust (MCP: a client treats them as untrusted unless the server is
    trusted): a tool that calls itself read-only or non-destructive is still ``medium`` (the user is asked) unless
    the manifest says otherwise or the user marked this plugin's annotations as trusted. A hint that asks for more
    caution (``destructiveHint``) is always honoured."""
    if tool.name in overrides:
        return MetonaRiskLevel(overrides[tool.name]), "manifest"
    ann = tool.annotations
    if ann is not None and annotations_trusted:
        if ann.read_only_hint:
            return MetonaRiskLevel.SAFE, "trusted_annotations"
        if ann.destructive_hint:
            return MetonaRiskLevel.HIGH, "trusted_annotations"
        if ann.destructive_hint is False:
            return MetonaRiskLevel.LOW, "trusted_annotations"
    if ann is not None and ann.destructive_hint and not ann.read_only_hint:
        return MetonaRiskLevel.HIGH, "destructive_hint"
    return MetonaRiskLevel.MEDIUM, "default"


def tool_description(tool: Any) -> str:
    text = (tool.description or tool.title or "").strip() or f"MCP tool {tool.name}"
    return text[:MAX_DESCRIPTION]


def convert_schema(schema: dict[str, Any]) -> MetonaToolParams:
    """An MCP input schema in the IR's dialect (what the IR cannot carry goes into the field's description)."""
    defs: dict[str, Any] = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    properties: dict[str, MetonaParamField] = {}
    for key, prop in (schema.get("properties") or {}).items():
        if not isinstance(prop, dict):
            prop = {}
        try:
            properties[key] = param_field(prop, defs)
        except (ValueError, KeyError, TypeError, BadRequestError):
            shown = json.dumps(prop, ensure_ascii=False)[:300]
            desc = str(prop.get("description") or key)
            properties[key] = MetonaParamField(type="string", description=f"{desc} (JSON Schema: {shown})")
    required = [r for r in schema.get("required") or [] if isinstance(r, str)]
    return MetonaToolParams(properties=properties, required=required or None)


# --- results ---------------------------------------------------------------------------------------------------


def map_result(result: Any, max_bytes: int) -> ToolOutput:
    """MCP ``CallToolResult`` → ToolOutput (``isError`` → ToolError ``MCP_TOOL_CALL_FAILED``).

    ``result`` keeps the content list (text, image, audio, resource, resource link) and the structured content;
    ``summary`` is the text the model reads (texts joined; other parts described in one line each).
    """
    content = [part.model_dump(mode="json", by_alias=True, exclude_none=True) for part in result.content]
    raw: dict[str, Any] = {"content": content}
    if result.structured_content is not None:
        raw["structured_content"] = result.structured_content
    size = len(json.dumps(raw, ensure_ascii=False).encode("utf-8"))
    if size > max_bytes:
        raise ToolError(
            f"the tool's result is {size} bytes, over the plugin's limit of {max_bytes} bytes",
            "MCP_TOOL_RESULT_TOO_LARGE",
        )
    lines = [_describe(part) for part in content]
    summary = "\n".join(line for line in lines if line)
    if not summary and result.structured_content is not None:
        summary = json.dumps(result.structured_content, ensure_ascii=False)
    if result.is_error:
        raise ToolError(summary or "the tool reported an error", "MCP_TOOL_CALL_FAILED")
    return ToolOutput(result=raw, summary=summary or "(no content)")


def _describe(part: dict[str, Any]) -> str:
    kind = part.get("type")
    if kind == "text":
        return str(part.get("text", ""))
    if kind in ("image", "audio"):
        size = len(part.get("data", "")) * 3 // 4
        return f"[{kind} {part.get('mimeType') or part.get('mime_type') or ''}, {size} bytes]"
    if kind == "resource":
        res = part.get("resource") or {}
        if "text" in res:
            return f"[resource {res.get('uri', '')}]\n{res['text']}"
        return f"[resource {res.get('uri', '')}, binary]"
    if kind == "resource_link":
        return f"[resource link {part.get('uri', '')}: {part.get('name', '')}]"
    return f"[{kind} content]"
