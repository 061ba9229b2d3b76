"""ToolRegistry: declarations exported as IR, registration rules, and every execute() outcome."""

from __future__ import annotations

import logging
from typing import Any, Literal

import anyio
import pytest
from pydantic import BaseModel, Field

from sidecar.agent.tools import (
    MAX_SUMMARY_CHARS,
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
    ToolParams,
    ToolRegistry,
    builtin_tools,
    default_registry,
)
from sidecar.core.errors import BadRequestError, ConflictError
from sidecar.ir import MetonaRiskLevel, MetonaToolCall, MetonaToolCategory, MetonaToolDef

BUILTIN_NAMES = [
    "read_file",
    "write_file",
    "list_directory",
    "search_files",
    "calculator",
    "get_current_time",
    "http_get",
    "memory_search",
    "knowledge_search",
]


def make_call(name: str, args: dict[str, Any] | None = None) -> MetonaToolCall:
    return MetonaToolCall(id="call_1", name=name, args=args or {}, iteration=1, timestamp=1)


def make_ctx(**kw: Any) -> ToolContext:
    return ToolContext(run_id="run_1", session_id="ses_1", tool_call_id="call_1", **kw)


class EchoParams(ToolParams):
    text: str = Field(description="What to echo.")
    times: int = Field(1, ge=1, le=5, description="How often.")


class Echo(Tool):
    name = "echo"
    description = "Echo the text."
    Params = EchoParams
    category = MetonaToolCategory.CUSTOM
    risk_level = MetonaRiskLevel.SAFE

    async def run(self, args: EchoParams, ctx: ToolContext) -> ToolOutput:
        return ToolOutput(result={"echo": [args.text] * args.times}, summary=args.text * args.times)


class Sleepy(Echo):
    name = "sleepy"
    timeout_ms = 50

    async def run(self, args: EchoParams, ctx: ToolContext) -> ToolOutput:
        await anyio.sleep(10)
        raise AssertionError("not reached")


class Failing(Echo):
    name = "failing"

    async def run(self, args: EchoParams, ctx: ToolContext) -> ToolOutput:
        raise ToolError("the thing is missing", "NOT_FOUND")


class Crashing(Echo):
    name = "crashing"

    async def run(self, args: EchoParams, ctx: ToolContext) -> ToolOutput:
        raise RuntimeError("secret-token-123 leaked in a traceback")


class OwnTimeout(Echo):
    name = "own_timeout"

    async def run(self, args: EchoParams, ctx: ToolContext) -> ToolOutput:
        raise TimeoutError("socket timed out")


class Unavailable(Echo):
    name = "unavailable"

    def unavailable_reason(self, ctx: ToolContext) -> str | None:
        return "no backend"


# --- declarations -----------------------------------------------------------------------------------------------


def test_default_registry_has_the_nine_builtins_in_order() -> None:
    reg = default_registry()
    assert reg.names() == BUILTIN_NAMES
    assert [t.name for t in builtin_tools()] == BUILTIN_NAMES


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_builtin_definition_is_valid_ir_and_round_trips(name: str) -> None:
    definition = default_registry().definition(name)
    wire = definition.model_dump(mode="json")
    assert all(isinstance(q, str) and q.strip() for q in wire.pop("examples", ["x"]))  # the IR extension, optional
    assert set(wire) == {
        "name",
        "description",
        "parameters",
        "category",
        "riskLevel",
        "requiresPermission",
        "timeoutMs",
    }
    assert wire["parameters"]["type"] == "object"
    assert wire["timeoutMs"] > 0
    assert MetonaToolDef.model_validate(definition.model_dump(mode="json")) == definition
    for key, prop in wire["parameters"]["properties"].items():
        assert prop["type"] in {"string", "number", "boolean", "object", "array"}, key
        assert prop["description"].strip(), key
    for req in wire["parameters"].get("required", []):
        assert req in wire["parameters"]["properties"]


def test_builtin_risk_and_permissions() -> None:
    reg = default_registry()
    table = {d.name: (d.category, d.risk_level, d.requires_permission) for d in reg.definitions()}
    assert table["write_file"] == (MetonaToolCategory.FILESYSTEM, MetonaRiskLevel.HIGH, True)
    assert table["http_get"] == (MetonaToolCategory.NETWORK, MetonaRiskLevel.MEDIUM, True)
    assert table["read_file"] == (MetonaToolCategory.FILESYSTEM, MetonaRiskLevel.LOW, False)
    assert table["calculator"] == (MetonaToolCategory.CALCULATION, MetonaRiskLevel.SAFE, False)
    assert table["get_current_time"] == (MetonaToolCategory.CUSTOM, MetonaRiskLevel.SAFE, False)
    assert reg.get("write_file").permission == "filesystem.write"  # type: ignore[union-attr]
    assert reg.get("http_get").permission == "network.http"  # type: ignore[union-attr]
    assert reg.definition("http_get").timeout_ms == 20_000


def test_read_file_parameters_exactly() -> None:
    params = default_registry().definition("read_file").parameters.model_dump(mode="json")
    assert params["required"] == ["path"]
    assert set(params["properties"]) == {"path", "start_line", "max_lines"}
    assert params["properties"]["start_line"]["type"] == "number"  # the IR has no integer
    assert "integer" in params["properties"]["start_line"]["description"]
    assert params["properties"]["path"]["type"] == "string"
    write = default_registry().definition("write_file").parameters.model_dump(mode="json")
    assert write["properties"]["mode"]["enum"] == ["overwrite", "append", "create"]


class Inner(BaseModel):
    a: int = Field(description="A number.")


class RichParams(ToolParams):
    opt: int | None = Field(None, description="Optional int.")
    choice: Literal["x", "y"] = Field("x", description="A choice.")
    tags: list[str] = Field(default_factory=list, description="Some tags.")
    inner: Inner = Field(description="Nested.")
    inners: list[Inner] | None = Field(None, description="Nested list.")
    ratio: float | int = Field(1, description="A ratio.")
    note: str = Field("", max_length=40, description="A note.")


class Rich(Echo):
    name = "rich"
    Params = RichParams  # type: ignore[assignment]


def test_schema_conversion_of_refs_optionals_literals_lists() -> None:
    reg = ToolRegistry()
    reg.register(Rich())
    wire = reg.definition("rich").parameters.model_dump(mode="json")
    props = wire["properties"]
    assert wire["required"] == ["inner"]
    assert props["opt"]["type"] == "number"
    assert props["choice"] == {"type": "string", "description": 'A choice. (default "x")', "enum": ["x", "y"]}
    assert props["tags"]["type"] == "array" and props["tags"]["items"]["type"] == "string"
    assert props["inner"]["type"] == "object" and "keys: a" in props["inner"]["description"]
    assert props["inners"]["type"] == "array" and props["inners"]["items"]["type"] == "object"
    nested = {"a": {"type": "number", "description": "A number. (integer)"}}  # the IR extension: keys carried
    assert props["inner"]["properties"] == nested and props["inner"]["required"] == ["a"]
    assert props["inners"]["items"]["properties"] == nested and props["inners"]["items"]["required"] == ["a"]
    assert "properties" not in props["tags"] and "required" not in props["choice"]  # absent, not null
    assert props["ratio"]["type"] == "number"
    assert props["note"]["description"] == 'A note. (at most 40 characters, default "")'  # the IR has no maxLength


class NoDescriptionParams(ToolParams):
    x: int


class MixedUnionParams(ToolParams):
    x: int | str = Field(description="Either.")


class MixedEnumParams(ToolParams):
    x: Literal[1, "one"] = Field(description="A number or a word.")


class IntEnumParams(ToolParams):
    x: Literal[1, 2] = Field(description="A number choice.")
    direct: Literal[True] = Field(True, description="Direct only.")


def test_a_number_enum_is_a_number_with_its_choices_in_the_hints() -> None:
    tool = Echo()
    tool.Params = IntEnumParams  # type: ignore[misc]
    reg = ToolRegistry()
    reg.register(tool)
    props = reg.definition("echo").parameters.model_dump(mode="json", exclude_none=True)["properties"]
    assert props["x"] == {"type": "number", "description": "A number choice. (integer, one of 1|2)"}
    assert props["direct"] == {"type": "boolean", "description": "Direct only. (default true)"}


@pytest.mark.parametrize("params", [NoDescriptionParams, MixedUnionParams, MixedEnumParams])
def test_inexpressible_schema_is_refused(params: type[ToolParams]) -> None:
    tool = Echo()
    tool.Params = params  # type: ignore[misc]
    with pytest.raises(BadRequestError) as info:
        ToolRegistry().register(tool)
    assert info.value.code == "TOOL_SCHEMA_INVALID"


def test_permission_without_name_is_refused() -> None:
    class Needy(Echo):
        name = "needy"
        requires_permission = True

    with pytest.raises(BadRequestError) as info:
        ToolRegistry().register(Needy())
    assert info.value.code == "TOOL_PERMISSION_MISSING"


# --- registration rules -----------------------------------------------------------------------------------------


def test_duplicate_is_refused_and_unregister_frees_the_name() -> None:
    reg = ToolRegistry()
    reg.register(Echo())
    with pytest.raises(ConflictError) as info:
        reg.register(Echo())
    assert info.value.code == "TOOL_ALREADY_REGISTERED"
    assert reg.unregister("echo") is True
    assert reg.unregister("echo") is False
    assert reg.get("echo") is None
    reg.register(Echo())
    assert reg.names() == ["echo"]


def test_namespaced_names() -> None:
    reg = ToolRegistry()
    reg.register(Echo())
    reg.register(Echo(), namespace="plugin-1")
    assert reg.names() == ["echo", "plugin-1.echo"]
    assert reg.definition("plugin-1.echo").name == "plugin-1.echo"
    with pytest.raises(ConflictError):
        reg.register(Echo(), namespace="plugin-1")


@pytest.mark.parametrize(
    ("namespace", "name"),
    [(None, "bad name"), (None, ""), (None, "x" * 65), ("a.b", "echo"), ("ns", "a/b"), (None, "a.b.c"), ("", "echo")],
)
def test_bad_names_are_refused(namespace: str | None, name: str) -> None:
    tool = Echo()
    tool.name = name  # type: ignore[misc]
    with pytest.raises(BadRequestError) as info:
        ToolRegistry().register(tool, namespace=namespace)
    assert info.value.code == "TOOL_NAME_INVALID"


def test_definitions_filtered_by_allowed_keep_registration_order() -> None:
    reg = default_registry()
    names = [d.name for d in reg.definitions(allowed={"http_get", "read_file", "nope"})]
    assert names == ["read_file", "http_get"]
    assert reg.definitions(allowed=[]) == []


def test_unavailable_lists_reasons() -> None:
    reg = default_registry()
    reasons = reg.unavailable(make_ctx())
    assert set(reasons) == {
        "read_file",
        "write_file",
        "list_directory",
        "search_files",
        "memory_search",
        "knowledge_search",
    }
    assert reasons["read_file"] == "no workspace folder is configured (config agent.workspaceRoots)"


# --- execute ----------------------------------------------------------------------------------------------------


def registry(*tools: Tool) -> ToolRegistry:
    reg = ToolRegistry()
    for t in tools:
        reg.register(t)
    return reg


@pytest.mark.anyio
async def test_success() -> None:
    run = await registry(Echo()).execute(make_call("echo", {"text": "hi", "times": 2}), make_ctx())
    assert run.error_code is None and run.invalid_arguments is False and run.citations == []
    wire = run.result.model_dump(mode="json")
    assert wire["toolCallId"] == "call_1" and wire["toolName"] == "echo"
    assert wire["result"] == {"echo": ["hi", "hi"]}
    assert wire["summary"] == "hihi"
    assert wire["success"] is True and "error" not in wire
    assert wire["durationMs"] >= 0 and wire["timestamp"] > 1_600_000_000_000


@pytest.mark.anyio
async def test_unknown_tool() -> None:
    run = await registry(Echo()).execute(make_call("nope"), make_ctx())
    assert run.error_code == "UNKNOWN_TOOL" and run.invalid_arguments is True
    assert run.result.success is False
    assert "echo" in (run.result.error or "")
    assert run.result.summary == f"nope failed: {run.result.error}"


@pytest.mark.anyio
async def test_invalid_arguments_are_listed_concisely() -> None:
    run = await registry(Echo()).execute(make_call("echo", {"times": 9, "extra": 1}), make_ctx())
    assert run.error_code == "INVALID_ARGUMENTS" and run.invalid_arguments is True
    error = run.result.error or ""
    assert error.startswith("invalid arguments: ")
    assert "text: Field required" in error
    assert "times: Input should be less than or equal to 5" in error
    assert "extra: Extra inputs are not permitted" in error


@pytest.mark.anyio
async def test_timeout() -> None:
    with anyio.fail_after(5):
        run = await registry(Sleepy()).execute(make_call("sleepy", {"text": "x"}), make_ctx())
    assert run.error_code == "TOOL_TIMEOUT" and run.invalid_arguments is False
    assert "50 ms" in (run.result.error or "")
    assert run.result.duration_ms >= 40


@pytest.mark.anyio
async def test_tool_error_keeps_code_and_message() -> None:
    run = await registry(Failing()).execute(make_call("failing", {"text": "x"}), make_ctx())
    assert run.error_code == "NOT_FOUND" and run.invalid_arguments is False
    assert run.result.error == "the thing is missing"
    assert run.result.summary == "failing failed: the thing is missing"
    assert run.result.model_dump(mode="json")["result"] is None


@pytest.mark.anyio
async def test_internal_error_is_hidden_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="sidecar.agent.tools.registry"):
        run = await registry(Crashing()).execute(make_call("crashing", {"text": "x"}), make_ctx())
    assert run.error_code == "TOOL_INTERNAL_ERROR"
    dumped = run.result.model_dump_json()
    assert "secret-token-123" not in dumped and "RuntimeError" not in dumped
    assert any("secret-token-123" in (r.exc_text or "") for r in caplog.records)


@pytest.mark.anyio
async def test_a_tools_own_timeout_error_is_not_a_tool_timeout(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.CRITICAL):
        run = await registry(OwnTimeout()).execute(make_call("own_timeout", {"text": "x"}), make_ctx())
    assert run.error_code == "TOOL_INTERNAL_ERROR"


@pytest.mark.anyio
async def test_unavailable_tool() -> None:
    run = await registry(Unavailable()).execute(make_call("unavailable", {"text": "x"}), make_ctx())
    assert run.error_code == "TOOL_UNAVAILABLE" and run.invalid_arguments is False
    assert "no backend" in (run.result.error or "")


@pytest.mark.anyio
async def test_cancellation_propagates() -> None:
    class Slow(Echo):
        name = "slow"
        timeout_ms = 60_000

        async def run(self, args: EchoParams, ctx: ToolContext) -> ToolOutput:
            await anyio.sleep(30)
            raise AssertionError("not reached")

    reg = registry(Slow())
    finished: list[Any] = []

    async def call() -> None:
        finished.append(await reg.execute(make_call("slow", {"text": "x"}), make_ctx()))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
    assert finished == []  # cancelled, not turned into a result


@pytest.mark.anyio
async def test_summary_is_capped() -> None:
    class Big(Echo):
        name = "big"

        async def run(self, args: EchoParams, ctx: ToolContext) -> ToolOutput:
            return ToolOutput(result=None, summary="y" * 50_000)

    run = await registry(Big()).execute(make_call("big", {"text": "x"}), make_ctx())
    summary = run.result.summary or ""
    assert len(summary) <= MAX_SUMMARY_CHARS
    assert summary.endswith(f"[truncated: {summary.count('y')} of 50000 chars]")


@pytest.mark.anyio
async def test_result_is_made_json_able_and_citations_pass_through() -> None:
    class Cites(Echo):
        name = "cites"

        async def run(self, args: EchoParams, ctx: ToolContext) -> ToolOutput:
            return ToolOutput(result={"model": Inner(a=3), "set": (1, 2)}, summary="ok", citations=[{"note_id": "n1"}])

    run = await registry(Cites()).execute(make_call("cites", {"text": "x"}), make_ctx())
    assert run.result.result == {"model": {"a": 3}, "set": [1, 2]}
    assert run.citations == [{"note_id": "n1"}]


@pytest.mark.anyio
async def test_error_is_capped_like_the_summary() -> None:
    class Loud(Echo):
        name = "loud"

        async def run(self, args: EchoParams, ctx: ToolContext) -> ToolOutput:
            raise ToolError("z" * 50_000, "LOUD")

    run = await registry(Loud()).execute(make_call("loud", {"text": "x"}), make_ctx())
    assert run.error_code == "LOUD"
    assert len(run.result.error or "") <= MAX_SUMMARY_CHARS
    assert len(run.result.summary or "") <= MAX_SUMMARY_CHARS
    assert (run.result.error or "").endswith("of 50000 chars]")
