"""Ollama's native API: ``POST /api/chat`` (NDJSON stream or one JSON object), ``GET /api/tags``,
``POST /api/show``, ``GET /api/version`` (github.com/ollama/ollama docs/api.md).

What is particular to Ollama:

* no auth by default (a Bearer token only when a key is configured, e.g. behind a proxy);
* images are base64 strings in ``message.images`` (URLs downloaded, data URIs decoded);
* tool calls arrive whole (``message.tool_calls`` with an argument *object*), never as deltas;
* reasoning arrives in ``message.thinking``; ``think`` is ``true``/``false`` or ``"low"``/``"medium"``/``"high"``;
* the last line says ``done: true`` with ``done_reason``, the token counts and the durations in nanoseconds;
  a stream that ends without it was cut; a line ``{"error": "..."}`` is an in-band failure;
* capabilities and context length per model come from ``/api/show`` (cached), else the conservative set;
* a model without the ``tools`` capability (known from ``/api/show``, or from Ollama's 400 "does not support
  tools", then retried once) gets the tools in its system prompt and its calls through the shared lenient parser
  (:mod:`.toolparse`), with earlier calls and results written back as text.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import anyio

from ..ir import (
    MetonaErrorCode,
    MetonaFinishReason,
    MetonaMessage,
    MetonaPerfStats,
    MetonaRequest,
    MetonaTokenUsage,
)
from . import _http
from .base import BaseAdapter, ProviderConfig, system_text, tool_text, tools_allowed
from .capabilities import CHAT, CONSERVATIVE, STREAMING, THINKING, TOOL_CALLING, VISION, ModelSpec
from .errors import ProviderError, provider_error, safe_message
from .stream import StreamAssembler
from .toolparse import call_text, tool_prompt

C = MetonaErrorCode

# IR thinkingEffort → Ollama ``think`` (IR 🔗 Thinking 模式 Provider 映射表, copied exactly)
THINK_BY_EFFORT: dict[str, str | bool] = {"low": "low", "medium": "medium", "high": "high", "max": True}

FINISH_BY_DONE_REASON: dict[str, MetonaFinishReason] = {
    "stop": MetonaFinishReason.STOP,
    "length": MetonaFinishReason.LENGTH,
    "load": MetonaFinishReason.STOP,
    "unload": MetonaFinishReason.STOP,
}

# /api/show ``capabilities`` → phase-2 capability names ("completion" is what makes a model a chat model)
CAPABILITY_NAMES: dict[str, tuple[str, ...]] = {
    "completion": (CHAT, STREAMING),
    "tools": (TOOL_CALLING,),
    "thinking": (THINKING,),
    "vision": (VISION,),
}

SHOW_CONCURRENCY = 4
"""At most this many ``/api/show`` calls at once while listing models."""

_IMAGE_DOWNLOAD = "image_download"


class OllamaAdapter(BaseAdapter):
    protocol = "ollama"
    stream_path = "/api/chat"
    send_path = "/api/chat"

    def __init__(self, config: ProviderConfig, *, transport: Any = None, client: Any = None) -> None:
        super().__init__(config, transport=transport, client=client)
        self._shown: dict[str, ModelSpec] = {}
        """What ``/api/show`` reported per model (filled by list_models / model_specs / show)."""
        self._no_tools: set[str] = set()
        """Models that answered "does not support tools": their tools go through the text fallback."""

    # ---- IR surface ----------------------------------------------------------------------------------------

    @property
    def supported_models(self) -> list[str]:
        return list(self._shown) or super().supported_models

    def model_spec(self, model: str) -> ModelSpec | None:
        return self._shown.get(model) or super().model_spec(model)

    @property
    def think_tags(self) -> bool:
        # Ollama before its thinking parser (and models without one) put <think>…</think> in the content
        return True

    async def health_check(self) -> bool:
        try:
            await self._request_json("GET", "/api/version")
        except ProviderError:
            return False
        return True

    async def model_specs(self) -> list[ModelSpec]:
        """The local models (``/api/tags``), each with what ``/api/show`` says about it; chat models only."""
        data = await self._request_json("GET", "/api/tags")
        entries = data.get("models")
        if not isinstance(entries, list):
            raise self.protocol_error("/api/tags: no models list", interrupted=False)
        names: list[tuple[str, dict[str, Any]]] = []
        for entry in entries:
            if isinstance(entry, dict):
                name = entry.get("name") or entry.get("model")
                if isinstance(name, str) and name:
                    details = entry.get("details")
                    names.append((name, details if isinstance(details, dict) else {}))
        specs: list[ModelSpec | None] = [None] * len(names)
        limiter = anyio.CapacityLimiter(SHOW_CONCURRENCY)

        async def one(i: int, name: str, details: dict[str, Any]) -> None:
            async with limiter:
                specs[i] = await self._spec_for(name, details)

        async with anyio.create_task_group() as tg:
            for i, (name, details) in enumerate(names):
                tg.start_soon(one, i, name, details)
        return [s for s in specs if s is not None]

    async def show(self, model: str) -> ModelSpec | None:
        """``/api/show`` for one model as a ModelSpec (cached); None when it is not a chat model."""
        return await self._spec_for(model, {})

    # ---- request -------------------------------------------------------------------------------------------

    def headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        extra = self.config.options.get("extra_headers")
        if isinstance(extra, Mapping):
            headers.update({str(k): str(v) for k, v in extra.items()})
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        return headers

    def _native_tools(self, model: str) -> bool:
        """False when the model has no native tool calling: /api/show said so, or Ollama refused tools."""
        if model in self._no_tools:
            return False
        spec = self._shown.get(model) or self._shown.get(f"{model}:latest")
        if spec is None or "ollama_capabilities" not in spec.metadata:
            return True
        return TOOL_CALLING in spec.capabilities

    def _text_tools(self, request: MetonaRequest, model: str) -> list[Any]:
        """The tools to offer as text (the fallback path), or [] when native tools apply or none are offered."""
        if self._native_tools(model) or not self._tools(request):
            return []
        return tools_allowed(request)

    async def build_payload(self, request: MetonaRequest, model: str, *, stream: bool) -> dict[str, Any]:
        text_tools = self._text_tools(request, model)
        payload: dict[str, Any] = {
            "model": model,
            "messages": await self._messages(request, as_text=bool(text_tools)),
            "stream": stream,
            "options": self._options(request),
        }
        if text_tools:
            messages = payload["messages"]
            system = messages[0] if messages and messages[0]["role"] == "system" else None
            prompt = tool_prompt(text_tools)
            if system is None:
                messages.insert(0, {"role": "system", "content": prompt})
            else:
                system["content"] = f"{system['content']}\n\n{prompt}"
        fmt = request.response_format
        if fmt is not None and fmt.type != "text":  # IR extension: Ollama's JSON mode / structured outputs
            payload["format"] = fmt.json_schema if fmt.type == "json_schema" and fmt.json_schema else "json"
        tools = [] if text_tools else self._tools(request)
        if tools:
            payload["tools"] = tools
        think = think_value(request)
        if think is not None and (think is False or self._may_think(model)):
            payload["think"] = think
        keep_alive = self.config.options.get("keep_alive")
        if isinstance(keep_alive, (str, int)) and not isinstance(keep_alive, bool):
            payload["keep_alive"] = keep_alive
        return payload

    def _may_think(self, model: str) -> bool:
        """False only when /api/show said the model has no "thinking" capability: Ollama answers 400 to
        ``think: true`` there, so a globally enabled thinking mode must not break non-thinking models."""
        spec = self._shown.get(model) or self._shown.get(f"{model}:latest")
        if spec is None or "ollama_capabilities" not in spec.metadata:
            return True
        return THINKING in spec.capabilities

    def _options(self, request: MetonaRequest) -> dict[str, Any]:
        params = request.params
        options: dict[str, Any] = {"temperature": params.temperature if params.temperature is not None else 0.0}
        if params.max_tokens is not None:
            options["num_predict"] = params.max_tokens
        if params.top_p is not None:
            options["top_p"] = params.top_p
        if params.stop_sequences:
            options["stop"] = list(params.stop_sequences)
        num_ctx = _configured_num_ctx(self.config)
        if num_ctx:
            options["num_ctx"] = num_ctx
        return options

    def _tools(self, request: MetonaRequest) -> list[dict[str, Any]]:
        if request.constraints is not None and request.constraints.max_tool_calls == 0:
            return []  # Ollama has no tool_choice: "none" is "no tools offered"
        return [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters.model_dump(mode="json"),
                },
            }
            for tool in tools_allowed(request)
        ]

    async def _messages(self, request: MetonaRequest, *, as_text: bool = False) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        system = system_text(request)
        if system:
            out.append({"role": "system", "content": system})
        for message in request.messages:
            out.append(await self._message(message, as_text=as_text))
        return out

    async def _message(self, message: MetonaMessage, *, as_text: bool = False) -> dict[str, Any]:
        if as_text and (message.role == "tool" or message.tool_calls):
            return self._text_message(message)
        if message.role == "tool":
            item = self._tool_message(message)
        else:
            item = {"role": message.role, "content": message.content}
        if message.role == "assistant":
            if message.reasoning_content:
                # Ollama's tool-calling docs pass the thinking back with the calls; harmless otherwise
                item["thinking"] = message.reasoning_content
            if message.tool_calls:
                item["tool_calls"] = [
                    {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.args}}
                    for call in message.tool_calls
                ]
        if message.images:
            item["images"] = [await self._image_b64(image.url) for image in message.images]
        return item

    def _text_message(self, message: MetonaMessage) -> dict[str, Any]:
        """A tool call or result for a model without tool support: the call as the JSON it would write, the
        result as a user message."""
        if message.role == "tool":
            name = message.tool_result.tool_name if message.tool_result else "tool"
            return {"role": "user", "content": f"Result of the tool {name}:\n{tool_text(message)}"}
        calls = "\n".join(call_text(call.name, call.args) for call in message.tool_calls or ())
        content = f"{message.content}\n{calls}" if message.content else calls
        return {"role": "assistant", "content": content}

    def _tool_message(self, message: MetonaMessage) -> dict[str, Any]:
        result = message.tool_result
        if result is None:
            return {"role": "tool", "content": message.content}
        return {
            "role": "tool",
            "content": tool_text(message),
            "tool_name": result.tool_name,
            "tool_call_id": result.tool_call_id,
        }

    async def _image_b64(self, url: str) -> str:
        try:
            _mime, data = await self.image_bytes(url)
        except ProviderError as exc:
            if exc.error.code in (C.NETWORK_ERROR, C.NETWORK_TIMEOUT):
                # not Ollama's failure: keep it apart from "is Ollama running?"
                raise provider_error(
                    exc.error.code,
                    f"{self.config.provider_id}: downloading an image failed ({exc.error.message})",
                    self.config.provider_id,
                    provider_code=_IMAGE_DOWNLOAD,
                ) from None
            raise
        return base64.b64encode(data).decode("ascii")

    # ---- the call: a clear message when Ollama is not running ---------------------------------------------

    async def _call(self, request: MetonaRequest, model: str, asm: StreamAssembler, stream: bool) -> None:
        try:
            text_tools = self._text_tools(request, model)
            if text_tools:
                asm.tool_fallback(text_tools)
            try:
                await super()._call(request, model, asm, stream)
            except ProviderError as exc:
                if text_tools or not self._refused_tools(exc, request) or asm.visible:
                    raise
                self._no_tools.add(model)  # retry once, the tools as text (nothing was shown yet)
                asm.tool_fallback(self._text_tools(request, model))
                await super()._call(request, model, asm, stream)
        except ProviderError as exc:
            raise self._unreachable(exc) from None

    def _refused_tools(self, exc: ProviderError, request: MetonaRequest) -> bool:
        """Ollama's 400 for tools sent to a model without the ``tools`` capability."""
        return exc.status == 400 and "does not support tools" in exc.error.message and bool(self._tools(request))

    def _unreachable(self, exc: ProviderError) -> ProviderError:
        error = exc.error
        transport_failure = exc.status is None and error.provider_code != _IMAGE_DOWNLOAD
        if error.code is not C.NETWORK_ERROR or exc.interrupted or not transport_failure:
            return exc  # an HTTP answer (e.g. 502), a cut stream or an image download: Ollama did answer
        return provider_error(
            C.NETWORK_ERROR,
            f"{error.message} — is Ollama running at {self.config.base_url}?",
            self.config.provider_id,
            retryable=error.retryable,
            provider_code=error.provider_code,
        )

    # ---- answers -------------------------------------------------------------------------------------------

    async def parse_stream(self, chunks: Any, asm: StreamAssembler) -> None:
        finished = False
        async for line in _http.iter_ndjson_lines(chunks):
            data = json.loads(line)
            if not isinstance(data, dict):
                raise ValueError("a line of the stream is not a JSON object")
            if "error" in data:
                raise self._in_band_error(data["error"], interrupted=True)
            await self._map_chunk(data, asm)
            if data.get("done") is True:
                finished = True
                self._map_done(data, asm)
        if not finished:
            raise provider_error(
                C.NETWORK_ERROR,
                f"{self.config.provider_id}: the stream ended without its final done line (stream cut)",
                self.config.provider_id,
                interrupted=True,
            )

    async def parse_body(self, data: dict[str, Any], asm: StreamAssembler) -> None:
        if "error" in data:
            raise self._in_band_error(data["error"], interrupted=False)
        try:
            await self._map_chunk(data, asm)
            self._map_done(data, asm)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            why = f"malformed answer ({type(exc).__name__}: {safe_message(str(exc), 200)})"
            raise self.protocol_error(why, interrupted=False) from None

    async def _map_chunk(self, data: dict[str, Any], asm: StreamAssembler) -> None:
        message = data.get("message")
        if message is None:
            return  # the final line of some versions carries no message
        if not isinstance(message, dict):
            raise ValueError("message is not an object")
        thinking = message.get("thinking")
        if thinking:
            await asm.reasoning(_text(thinking, "message.thinking"))
        content = message.get("content")
        if content:
            await asm.text(_text(content, "message.content"))
        calls = message.get("tool_calls")
        if calls:
            if not isinstance(calls, list):
                raise ValueError("message.tool_calls is not a list")
            for call in calls:
                await self._map_tool_call(call, asm)

    async def _map_tool_call(self, call: Any, asm: StreamAssembler) -> None:
        if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
            raise ValueError("a tool call has no function object")
        function = call["function"]
        name = function.get("name")
        call_id = call.get("id")
        await asm.tool_call(
            name=name if isinstance(name, str) else "",
            args=function.get("arguments"),
            id=call_id if isinstance(call_id, str) and call_id else None,
        )

    def _map_done(self, data: dict[str, Any], asm: StreamAssembler) -> None:
        reason = data.get("done_reason")
        finish = FINISH_BY_DONE_REASON.get(reason) if isinstance(reason, str) else None
        asm.finish(finish or MetonaFinishReason.STOP)  # tool calls turn "stop" into tool_calls (assembler)
        prompt = _count(data.get("prompt_eval_count"))
        output = _count(data.get("eval_count"))
        if prompt is not None or output is not None:
            p, o = prompt or 0, output or 0
            asm.usage(MetonaTokenUsage(input_tokens=p, output_tokens=o, total_tokens=p + o))
        perf = perf_stats(data)
        if perf is not None:
            asm.perf(perf)

    def _in_band_error(self, raw: Any, *, interrupted: bool) -> ProviderError:
        message = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False, default=str)
        code = self.classify_error(500, None, message)
        return provider_error(
            code,
            f"{self.config.provider_id}: {safe_message(message)}",
            self.config.provider_id,
            retryable=code is C.UNKNOWN or code in (C.MODEL_OVERLOADED, C.NETWORK_ERROR),
            provider_code="stream_error",
            interrupted=interrupted,
        )

    # ---- errors ------------------------------------------------------------------------------------------

    def classify_error(self, status: int, provider_code: str | None, message: str) -> MetonaErrorCode:
        lowered = message.lower()
        if status == 404 or ("not found" in lowered and "model" in lowered):
            return C.MODEL_NOT_FOUND
        if "context length" in lowered or "context window" in lowered:
            return C.CONTEXT_LENGTH_EXCEEDED
        if status == 503 or "server busy" in lowered:
            return C.MODEL_OVERLOADED
        return super().classify_error(status, provider_code, message)

    # ---- models -----------------------------------------------------------------------------------------

    async def _request_json(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            data = await self.request_json(method, path, body=body)
        except ProviderError as exc:
            raise self._unreachable(exc) from None
        if not isinstance(data, dict):
            raise self.protocol_error(f"{path}: the answer is not a JSON object", interrupted=False)
        return data

    async def _spec_for(self, name: str, details: dict[str, Any]) -> ModelSpec | None:
        try:
            shown = await self._request_json("POST", "/api/show", {"model": name})
        except ProviderError:
            if name in self._shown:
                return self._shown[name]  # a passing failure does not forget what was shown before
            shown = None  # an unreadable model still appears, with the conservative set
        spec = spec_from_show(name, details, shown, num_ctx=_configured_num_ctx(self.config))
        if spec is not None:
            self._shown[name] = spec
        return spec


# ---- pure helpers ------------------------------------------------------------------------------------------


def think_value(request: MetonaRequest) -> str | bool | None:
    """The ``think`` field: thinkingEnabled false → false; an effort → the table; enabled alone → true."""
    params = request.params
    if params.thinking_enabled is False:
        return False
    if params.thinking_effort is not None:
        return THINK_BY_EFFORT[params.thinking_effort]
    if params.thinking_enabled:
        return True
    return None


def perf_stats(data: Mapping[str, Any]) -> MetonaPerfStats | None:
    """Ollama's nanosecond durations as MetonaPerfStats (ms); tokens/s = eval_count / eval_duration."""
    load = _count(data.get("load_duration"))
    prompt = _count(data.get("prompt_eval_duration"))
    evaluation = _count(data.get("eval_duration"))
    if load is None and prompt is None and evaluation is None:
        return None
    eval_count = _count(data.get("eval_count"))
    tps = eval_count / (evaluation / 1e9) if evaluation and eval_count is not None else None
    return MetonaPerfStats(
        load_duration_ms=None if load is None else load / 1e6,
        prompt_eval_duration_ms=None if prompt is None else prompt / 1e6,
        eval_duration_ms=None if evaluation is None else evaluation / 1e6,
        tokens_per_second=tps,
    )


def spec_from_show(
    name: str, details: Mapping[str, Any], shown: Mapping[str, Any] | None, *, num_ctx: int | None = None
) -> ModelSpec | None:
    """A ModelSpec from ``/api/tags`` details and the ``/api/show`` answer (None: not a chat model).

    Capabilities only from ``capabilities`` (conservative when absent); context window: the configured
    ``num_ctx``, else the Modelfile's ``num_ctx``, else ``<arch>.context_length``, else conservative.
    """
    shown = shown or {}
    raw_caps = shown.get("capabilities")
    capabilities: tuple[str, ...] = CONSERVATIVE
    if isinstance(raw_caps, list) and raw_caps:
        if "completion" not in raw_caps:
            return None  # embedding-only (or image-generation) models cannot chat
        names: list[str] = []
        for cap in raw_caps:
            for mapped in CAPABILITY_NAMES.get(cap, ()) if isinstance(cap, str) else ():
                if mapped not in names:
                    names.append(mapped)
        capabilities = tuple(names)
    shown_details = shown.get("details")
    if isinstance(shown_details, Mapping):
        details = {**details, **shown_details}
    trained = _context_length(shown.get("model_info"))
    window = num_ctx or _modelfile_num_ctx(shown.get("parameters")) or trained or ModelSpec.CONSERVATIVE_CONTEXT
    metadata: dict[str, Any] = {
        key: details[key]
        for key in ("family", "parameter_size", "quantization_level", "format")
        if isinstance(details.get(key), str) and details[key]
    }
    if trained:
        metadata["context_length"] = trained
    if isinstance(raw_caps, list):
        metadata["ollama_capabilities"] = [c for c in raw_caps if isinstance(c, str)]
    return ModelSpec(
        id=name,
        display_name=name,
        context_window=window,
        max_output_tokens=min(ModelSpec.CONSERVATIVE_OUTPUT, window),
        capabilities=capabilities,
        metadata=metadata,
    )


def _context_length(model_info: Any) -> int | None:
    if not isinstance(model_info, Mapping):
        return None
    arch = model_info.get("general.architecture")
    if isinstance(arch, str):
        value = _count(model_info.get(f"{arch}.context_length"))
        if value:
            return value
    for key, value in model_info.items():
        if isinstance(key, str) and key.endswith(".context_length") and _count(value):
            return _count(value)
    return None


def _modelfile_num_ctx(parameters: Any) -> int | None:
    """``num_ctx`` from the ``parameters`` text of ``/api/show`` (``"num_ctx    8192\\nstop ..."``)."""
    if not isinstance(parameters, str):
        return None
    for line in parameters.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "num_ctx" and parts[1].isdigit():
            return int(parts[1]) or None
    return None


def _configured_num_ctx(config: ProviderConfig) -> int | None:
    value = config.options.get("num_ctx")
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _count(value: Any) -> int | None:
    """A non-negative integer field of an Ollama answer, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        return None
    return int(value)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{where} is not a string")
    return value
