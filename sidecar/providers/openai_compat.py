"""The OpenAI-compatible Chat Completions protocol (``POST {base_url}/chat/completions``): the ``deepseek``,
``agnes-ai`` (its OpenAI-compatible endpoint) and ``openai`` presets, and any server that speaks it (vLLM,
llama.cpp, LM Studio, OpenRouter, ...).

One request builder and one parser serve every vendor; what differs is data, a :class:`Dialect` per preset
(ARCHITECTURE.md "capabilities are data"), read where it matters:

* thinking control (IR 🔗 "Thinking 模式 Provider 映射表"): DeepSeek ``thinking: {type}`` + ``reasoning_effort``;
  Agnes ``chat_template_kwargs: {enable_thinking}``; OpenAI ``reasoning_effort`` for reasoning models only;
  anything else gets no thinking parameter at all (never an unknown key a vendor may reject);
* the DeepSeek pass-back rule: in thinking mode (its default), the ``reasoning_content`` of every assistant
  message of a user turn that made tool calls must be sent back, or the next request fails with 400
  (api-docs.deepseek.com/guides/thinking_mode); other turns' reasoning is not sent (ignored at best);
* ``parallel_tool_calls: false`` (``constraints.maxToolCalls == 1``) goes to OpenAI only: DeepSeek and Agnes do not
  document it, and OpenAI's o-series rejects it;
* OpenAI's reasoning models (o-series, gpt-5 family) reject ``temperature``/``top_p``/``stop`` and want
  ``max_completion_tokens`` (which every OpenAI model takes).

Options a provider record may carry: ``extra_headers``, ``extra_body`` (merged last), ``think_tags`` (bool),
``thinking_style`` (one of :data:`ThinkingStyle`, for a server whose preset we do not know) and
``reasoning_model`` (bool, overrides the OpenAI reasoning-model guess).

The stream side is vendor-neutral: ``reasoning_content`` (DeepSeek, Agnes) or ``reasoning`` (OpenRouter, vLLM)
becomes reasoning, ``<think>…</think>`` at the start of the text too (``options["think_tags"]``, default on), tool
call fragments are buffered by index, a usage-only final chunk (``stream_options.include_usage``) is read, and an
in-band ``{"error": …}`` chunk fails the stream with the mapped IR code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

import orjson

from ..ir import MetonaErrorCode, MetonaFinishReason, MetonaMessage, MetonaRequest, MetonaTokenUsage
from . import _http
from .base import BaseAdapter, system_text, tool_text, tools_allowed
from .capabilities import THINKING, ModelSpec
from .errors import (
    ProviderError,
    code_for_status,
    json_body,
    provider_error,
    retry_after_ms,
    retryable_for,
    safe_message,
)
from .presets import OPENAI, PRESETS
from .stream import StreamAssembler

C = MetonaErrorCode
F = MetonaFinishReason

ThinkingStyle = Literal["deepseek", "chat_template_kwargs", "openai", "none"]


@dataclass(frozen=True)
class Dialect:
    """What one vendor of the OpenAI-compatible protocol accepts beyond the common request."""

    thinking: ThinkingStyle = "none"
    echo_reasoning_on_tool_turns: bool = False
    """DeepSeek: ``reasoning_content`` of a tool-calling user turn must be sent back (else HTTP 400)."""
    parallel_tool_calls: bool = False
    """The vendor documents ``parallel_tool_calls`` (DeepSeek and Agnes do not: never sent to them)."""
    max_tokens_key: str = "max_tokens"


DIALECTS: dict[str, Dialect] = {
    "deepseek": Dialect(thinking="deepseek", echo_reasoning_on_tool_turns=True),
    "agnes-ai": Dialect(thinking="chat_template_kwargs"),
    "openai": Dialect(thinking="openai", parallel_tool_calls=True, max_tokens_key="max_completion_tokens"),
}
GENERIC = Dialect()

# IR thinkingEffort → vendor value (the seed's mapping table)
DEEPSEEK_EFFORT = {"low": "high", "medium": "high", "high": "high", "max": "max"}
AGNES_THINKING = {"low": False, "medium": True, "high": True, "max": True}
OPENAI_EFFORT = {"low": "low", "medium": "medium", "high": "high", "max": "high"}

FINISH_REASONS: dict[str, MetonaFinishReason] = {
    "stop": F.STOP,
    "length": F.LENGTH,
    "tool_calls": F.TOOL_CALLS,
    "function_call": F.TOOL_CALLS,
    "content_filter": F.CONTENT_FILTER,
}

_OPENAI_REASONING = re.compile(r"^(o\d|gpt-5)(?!.*-chat)")
_O_SERIES = re.compile(r"^o\d")
_DATED = re.compile(r"-\d{4}-\d{2}-\d{2}$")
_NOT_CHAT = ("embed", "whisper", "tts", "dall-e", "moderation", "transcribe", "rerank", "realtime", "image", "video",
             "sora", "davinci", "babbage")  # fmt: skip
"""Ids a ``/models`` list carries that are not chat models (OpenAI, Agnes list their image/audio models too)."""

# error text → IR code (matched on the lower-cased "code type message" of an error body)
_QUOTA = ("insufficient_quota", "insufficient balance", "exceeded your current quota", "billing_hard_limit")
_CONTEXT = ("context_length_exceeded", "context length", "context window", "maximum context", "prompt is too long",
            "too many input tokens", "input token count", "reduce the length of the messages")  # fmt: skip
_FILTERED = ("content_policy_violation", "content_filter", "content management policy", "safety system",
             "usage policy", "data_inspection_failed")  # fmt: skip
_AUTH = ("invalid_api_key", "incorrect api key", "authentication")
_RATE = ("rate_limit", "rate limit", "too many requests")
_OVERLOAD = ("overloaded", "server is busy", "at capacity")


class OpenAICompatAdapter(BaseAdapter):
    protocol = OPENAI
    stream_path = "/chat/completions"
    send_path = "/chat/completions"

    @property
    def dialect(self) -> Dialect:
        base = DIALECTS.get(self.config.preset, GENERIC)
        style = self.config.options.get("thinking_style")
        if style in ("deepseek", "chat_template_kwargs", "openai", "none") and style != base.thinking:
            return Dialect(style, base.echo_reasoning_on_tool_turns, base.parallel_tool_calls, base.max_tokens_key)
        return base

    @property
    def think_tags(self) -> bool:
        return bool(self.config.options.get("think_tags", True))

    def headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        key = (self.config.api_key or "").strip()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        extra = self.config.options.get("extra_headers")
        if isinstance(extra, Mapping):
            headers.update({str(k): str(v) for k, v in extra.items() if v is not None})
        return headers

    # ---- request ---------------------------------------------------------------------------------------------

    async def build_payload(self, request: MetonaRequest, model: str, *, stream: bool) -> dict[str, Any]:
        params = request.params
        dialect = self.dialect
        reasoning_model = dialect.thinking == "openai" and self.is_reasoning_model(model)
        payload: dict[str, Any] = {"model": model, "messages": self.messages(request), "stream": stream}
        if stream:
            payload["stream_options"] = {"include_usage": True}
        if not reasoning_model:  # OpenAI's reasoning models accept only the default temperature/top_p, no stop
            payload["temperature"] = params.temperature if params.temperature is not None else 0.0
            if params.top_p is not None:
                payload["top_p"] = params.top_p
            if params.stop_sequences:
                payload["stop"] = list(params.stop_sequences)
        if params.max_tokens is not None:
            payload[dialect.max_tokens_key] = params.max_tokens
        payload.update(self._tools(request, model))
        payload.update(self._thinking(request, model))
        response_format = openai_response_format(request)
        if response_format is not None:
            payload["response_format"] = response_format
        extra = self.config.options.get("extra_body")
        if isinstance(extra, Mapping):
            payload.update(extra)
        return payload

    def _tools(self, request: MetonaRequest, model: str) -> dict[str, Any]:
        max_calls = request.constraints.max_tool_calls if request.constraints else None
        tools = [] if max_calls == 0 else tools_allowed(request)
        if not tools:
            return {}
        out: dict[str, Any] = {
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters.model_dump(mode="json"),
                    },
                }
                for t in tools
            ]
        }
        if max_calls == 1 and self.dialect.parallel_tool_calls and not _O_SERIES.match(_bare(model)):
            out["parallel_tool_calls"] = False
        return out

    def _thinking(self, request: MetonaRequest, model: str) -> dict[str, Any]:
        """The vendor's thinking switch; nothing when the request says nothing (the vendor default stands).

        ``thinkingEffort`` without ``thinkingEnabled`` asks for thinking at that effort.
        """
        params = request.params
        effort = params.thinking_effort
        enabled = params.thinking_enabled
        if enabled is None and effort is not None:
            enabled = True
        if enabled is None:
            return {}
        style = self.dialect.thinking
        if style == "deepseek":  # thinking is on by default on DeepSeek V4: "off" must be said
            if not enabled:
                return {"thinking": {"type": "disabled"}}
            out: dict[str, Any] = {"thinking": {"type": "enabled"}}
            if effort:
                out["reasoning_effort"] = DEEPSEEK_EFFORT[effort]
            return out
        if style == "chat_template_kwargs":
            return {
                "chat_template_kwargs": {"enable_thinking": bool(enabled) and AGNES_THINKING.get(effort or "", True)}
            }
        if style == "openai" and enabled and effort and self.is_reasoning_model(model):
            return {"reasoning_effort": OPENAI_EFFORT[effort]}
        return {}

    def is_reasoning_model(self, model: str) -> bool:
        """An OpenAI reasoning model (o-series, gpt-5 family but not ``gpt-5-chat``), or one we know thinks.

        ``options["reasoning_model"]`` (bool) overrides the guess, e.g. for a proxy with its own model names.
        """
        override = self.config.options.get("reasoning_model")
        if isinstance(override, bool):
            return override
        spec = self.model_spec(model)
        if spec is not None and spec.supports(THINKING):
            return True
        return bool(_OPENAI_REASONING.match(_bare(model)))

    def messages(self, request: MetonaRequest) -> list[dict[str, Any]]:
        """System first (the four prompt sections), then the IR messages in order."""
        out: list[dict[str, Any]] = []
        system = system_text(request)
        if system:
            out.append({"role": "system", "content": system})
        # the pass-back rule is a thinking-mode rule: not applied when the request turns thinking off
        echo_rule = self.dialect.echo_reasoning_on_tool_turns and request.params.thinking_enabled is not False
        echo = _tool_turn_assistants(request.messages) if echo_rule else set()
        for i, message in enumerate(request.messages):
            out.append(self._message(message, echo_reasoning=i in echo))
        return out

    def _message(self, m: MetonaMessage, *, echo_reasoning: bool) -> dict[str, Any]:
        if m.role == "tool":
            if m.tool_result is None:
                raise self.request_error("a tool message has no toolResult (its toolCallId is needed)")
            return {"role": "tool", "tool_call_id": m.tool_result.tool_call_id, "content": tool_text(m)}
        if m.role == "assistant":
            out: dict[str, Any] = {"role": "assistant", "content": m.content}
            if m.tool_calls:
                out["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": json.dumps(call.args, ensure_ascii=False)},
                    }
                    for call in m.tool_calls
                ]
            if echo_reasoning and m.reasoning_content:
                out["reasoning_content"] = m.reasoning_content
            return out
        if m.role == "user" and m.images:
            parts: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
            for image in m.images:
                url: dict[str, Any] = {"url": image.url}
                if image.detail:
                    url["detail"] = image.detail
                parts.append({"type": "image_url", "image_url": url})
            return {"role": "user", "content": parts}
        return {"role": m.role, "content": m.content}

    # ---- streaming answer ------------------------------------------------------------------------------------

    async def parse_stream(self, chunks: Any, asm: StreamAssembler) -> None:
        state = _StreamState()
        async for event in _http.iter_sse(chunks):
            data = event.data.strip()
            if not data:
                continue
            if data == "[DONE]":
                state.done = True
                break
            content = _common_text(data) if event.event == "message" else None
            if content is not None:
                await asm.text(content)
                continue
            chunk = json.loads(data)
            if not isinstance(chunk, dict):
                raise ValueError("a chunk is not a JSON object")
            if event.event == "error" or chunk.get("error"):
                raise self.inband_error(chunk, interrupted=True)
            await self._on_chunk(chunk, asm, state)
        if not state.done and not state.finished:
            raise provider_error(
                C.NETWORK_ERROR,
                f"{self.config.provider_id}: the stream ended before the answer was complete",
                self.config.provider_id,
                interrupted=True,
            )

    async def _on_chunk(self, chunk: dict[str, Any], asm: StreamAssembler, state: _StreamState) -> None:
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            asm.usage(map_usage(usage))
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:  # we ask for one choice (n=1)
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                await self._on_delta(delta, asm, state)
            reason = choice.get("finish_reason")
            if reason:
                await self._on_finish(str(reason), asm, interrupted=True)
                state.finished = True
                for index in state.tools:
                    await asm.complete_tool(index)

    async def _on_delta(self, delta: dict[str, Any], asm: StreamAssembler, state: _StreamState) -> None:
        if len(delta) == 1:  # the common chunk, {"content": "…"}: straight to the assembler
            content = delta.get("content")
            if type(content) is str:
                await asm.text(content)
                return
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str):
            await asm.reasoning(reasoning)
        await asm.text(_text(delta.get("content")))
        refusal = delta.get("refusal")
        if isinstance(refusal, str):
            await asm.text(refusal)
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for position, call in enumerate(calls):
                await self._on_tool_delta(call, position, asm, state)
        legacy = delta.get("function_call")  # the deprecated ``functions`` API: one call, index 0
        if isinstance(legacy, dict):
            await self._on_tool_delta({"index": 0, "function": legacy}, 0, asm, state)

    async def _on_tool_delta(
        self, call: dict[str, Any], position: int, asm: StreamAssembler, state: _StreamState
    ) -> None:
        index = int(call.get("index", position))
        fn = call.get("function") or {}
        name = fn.get("name") or None
        if name and state.tools.get(index) == name:
            name = None  # some servers repeat the whole name on every fragment
        elif name:
            state.tools[index] = state.tools.get(index, "") + name
        else:
            state.tools.setdefault(index, "")
        args = fn.get("arguments")
        if args is not None and not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)  # a server that sends the object itself
        await asm.tool_delta(index, id=call.get("id") or None, name=name, args=args or None)

    async def _on_finish(self, reason: str, asm: StreamAssembler, *, interrupted: bool) -> None:
        if reason == "insufficient_system_resource":  # DeepSeek cut the answer short for lack of capacity
            raise provider_error(
                C.MODEL_OVERLOADED,
                f"{self.config.provider_id}: the server interrupted the answer (insufficient system resource)",
                self.config.provider_id,
                provider_code=reason,
                interrupted=interrupted,
            )
        if reason == "error":  # OpenRouter, when the error object itself did not come
            raise provider_error(
                C.UNKNOWN,
                f"{self.config.provider_id}: the server ended the answer with an error",
                self.config.provider_id,
                retryable=False,
                provider_code=reason,
                interrupted=interrupted,
            )
        asm.finish(FINISH_REASONS.get(reason, F.STOP))

    # ---- non-streaming answer --------------------------------------------------------------------------------

    async def parse_body(self, data: dict[str, Any], asm: StreamAssembler) -> None:
        if data.get("error"):
            raise self.inband_error(data, interrupted=False)
        try:
            choices = data.get("choices")
            if not isinstance(choices, list) or not choices:
                raise self.protocol_error("the answer has no choices", interrupted=False)
            choice = choices[0]
            message = choice.get("message") or {}
            reasoning = message.get("reasoning_content") or message.get("reasoning")
            if isinstance(reasoning, str):
                await asm.reasoning(reasoning)
            await asm.text(_text(message.get("content")) or _text(message.get("refusal")))
            for call in message.get("tool_calls") or ():
                fn = call.get("function") or {}
                await asm.tool_call(name=fn.get("name") or "", args=fn.get("arguments"), id=call.get("id") or None)
            usage = data.get("usage")
            if isinstance(usage, dict):
                asm.usage(map_usage(usage))
            reason = choice.get("finish_reason")
            if reason:
                await self._on_finish(str(reason), asm, interrupted=False)
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
            raise self.protocol_error(f"unexpected answer ({type(exc).__name__})", interrupted=False) from None

    # ---- errors ----------------------------------------------------------------------------------------------

    def error_from_response(self, status: int, headers: Mapping[str, str], body: bytes) -> ProviderError:
        data = json_body(body)
        message, provider_code = self.error_details(data, body)
        code = self.classify_error(status, _error_text(data, provider_code), message)
        return provider_error(
            code,
            f"{self.config.provider_id}: HTTP {status}: {safe_message(message)}",
            self.config.provider_id,
            retryable=_retryable(code, status, provider_code),
            provider_code=provider_code or str(status),
            retry_after_ms=retry_after_ms(headers),
            status=status,
        )

    def inband_error(self, payload: dict[str, Any], *, interrupted: bool) -> ProviderError:
        """An ``{"error": …}`` object inside a 200 answer (a stream chunk, or a proxy's non-streaming body)."""
        message, provider_code = self.error_details(payload, b"")
        err = payload.get("error")
        status = _status_in(err) if isinstance(err, dict) else None
        code = self.classify_error(status or 0, _error_text(payload, provider_code), message)
        return provider_error(
            code,
            f"{self.config.provider_id}: error in the answer: {safe_message(message)}",
            self.config.provider_id,
            retryable=_retryable(code, status or 0, provider_code),
            provider_code=provider_code or (str(status) if status else None),
            interrupted=interrupted,
            status=status,
        )

    def classify_error(self, status: int, provider_code: str | None, message: str) -> MetonaErrorCode:
        """The IR code of an error: the vendor's code/type/message first, the HTTP status second.

        OpenAI's 429 ``insufficient_quota`` and DeepSeek's 402 are QUOTA_EXCEEDED (never retried), a context
        overflow is CONTEXT_LENGTH_EXCEEDED whatever the 4xx, a 404 that is not about a model (a wrong base URL)
        is UNKNOWN rather than MODEL_NOT_FOUND.
        """
        text = f"{provider_code or ''} {message}".lower()
        if status == 402 or _has(text, _QUOTA):
            return C.QUOTA_EXCEEDED
        if status in (401, 403):
            return C.AUTH_INVALID
        if status in (0, 400, 413, 422):
            if _has(text, _CONTEXT):
                return C.CONTEXT_LENGTH_EXCEEDED
            if _output_too_long(text):
                return C.OUTPUT_LENGTH_EXCEEDED
        if _has(text, _FILTERED):
            return C.CONTENT_FILTERED
        if status == 404:
            return C.MODEL_NOT_FOUND if "model" in text else C.UNKNOWN
        if status == 0:
            return _inband_code(text)
        return code_for_status(status)

    # ---- models ----------------------------------------------------------------------------------------------

    async def model_specs(self) -> list[ModelSpec]:
        """``GET {base_url}/models`` merged with what we know (the phase-2 ``providers/models`` view).

        Listed ids come first, in the server's order: a known id (or a dated snapshot of one, ``gpt-4o-2024-08-06``)
        keeps its spec; an unknown one gets the conservative capability set and windows (the context window the
        server states, vLLM ``max_model_len`` / OpenRouter ``context_length``, when it states one); an unknown
        id that is plainly not a chat model (embeddings, audio, image, video) is left out. Known models the server
        did not list follow (an alias it no longer lists may still answer).
        """
        data = await self.request_json("GET", "/models")
        items = data.get("data") if isinstance(data, dict) else data
        if not isinstance(items, list):
            raise self.protocol_error("the model list has no data array", interrupted=False)
        specs: list[ModelSpec] = []
        seen: set[str] = set()
        for item in items:
            model_id = item.get("id") if isinstance(item, dict) else item
            if not isinstance(model_id, str) or not model_id or model_id in seen:
                continue
            seen.add(model_id)
            spec = self.model_spec(model_id)
            if spec is None:
                if _has(_bare(model_id), _NOT_CHAT):
                    continue
                spec = _unknown_spec(model_id, item if isinstance(item, dict) else {})
            specs.append(spec)
        specs.extend(spec for spec in self.known_specs().values() if spec.id not in seen)
        return specs

    def model_spec(self, model: str) -> ModelSpec | None:
        """A known model by id, or by the id of a dated snapshot (its spec under the snapshot's id)."""
        known = self.known_specs()
        spec = known.get(model)
        if spec is not None:
            return spec
        alias = _DATED.sub("", model)
        spec = known.get(alias) if alias != model else None
        return replace(spec, id=model, display_name=model) if spec is not None else None

    def known_specs(self) -> dict[str, ModelSpec]:
        """The preset's models, overridden by the provider record's own."""
        preset = PRESETS.get(self.config.preset)
        specs = {m.id: m for m in preset.models} if preset else {}
        specs.update({m.id: m for m in self.config.models})
        return specs


class _StreamState:
    __slots__ = ("done", "finished", "tools")

    def __init__(self) -> None:
        self.done = False
        """``data: [DONE]`` arrived."""
        self.finished = False
        """A ``finish_reason`` arrived."""
        self.tools: dict[int, str] = {}
        """Tool call index → its name so far."""


# ---- helpers ---------------------------------------------------------------------------------------------------


def map_usage(usage: dict[str, Any]) -> MetonaTokenUsage:
    """OpenAI-style usage → MetonaTokenUsage (DeepSeek's cache hit/miss fields, else OpenAI's cached_tokens)."""
    prompt = _count(usage.get("prompt_tokens")) or 0
    completion = _count(usage.get("completion_tokens")) or 0
    total = _count(usage.get("total_tokens")) or prompt + completion
    details = usage.get("completion_tokens_details")
    reasoning = _count(details.get("reasoning_tokens")) if isinstance(details, dict) else None
    hit = _count(usage.get("prompt_cache_hit_tokens"))
    miss = _count(usage.get("prompt_cache_miss_tokens"))
    if hit is None:
        prompt_details = usage.get("prompt_tokens_details")
        hit = _count(prompt_details.get("cached_tokens")) if isinstance(prompt_details, dict) else None
    if hit is not None and miss is None:
        miss = max(prompt - hit, 0)
    return MetonaTokenUsage(
        input_tokens=prompt,
        output_tokens=completion,
        total_tokens=total,
        reasoning_tokens=reasoning or None,
        cache_hit_tokens=hit,
        cache_miss_tokens=miss,
    )


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return int(value)


def _text(content: Any) -> str:
    """A message's ``content``: a string, or (some servers) a list of ``{"type": "text", "text"}`` parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text") or "" for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def _tool_turn_assistants(messages: list[MetonaMessage]) -> set[int]:
    """Indexes of the assistant messages whose user turn (the messages between two user messages) made a tool
    call: DeepSeek wants their ``reasoning_content`` back in every later request."""
    keep: set[int] = set()
    turn: list[int] = []
    tool_turn = False
    for i, m in enumerate([*messages, None]):
        if m is None or m.role == "user":
            if tool_turn:
                keep.update(turn)
            turn, tool_turn = [], False
            continue
        if m.role == "assistant":
            turn.append(i)
            tool_turn = tool_turn or bool(m.tool_calls)
    return keep


def _bare(model: str) -> str:
    """``openai/o3`` (a router's id) → ``o3``, lower-cased."""
    return model.rsplit("/", 1)[-1].lower()


def _has(text: str, needles: tuple[str, ...]) -> bool:
    return any(n in text for n in needles)


def _output_too_long(text: str) -> bool:
    """OpenAI "max_tokens is too large … supports at most N completion tokens"; DeepSeek "Invalid max_tokens
    value, the valid range of max_tokens is [1, 8192]"."""
    return ("max_tokens" in text or "max_completion_tokens" in text) and _has(
        text, ("too large", "valid range", "at most", "exceed")
    )


def _inband_code(text: str) -> MetonaErrorCode:
    """An error inside a 200 stream carries no HTTP status: its code/type/message decide."""
    if _has(text, _RATE):
        return C.RATE_LIMITED
    if _has(text, _OVERLOAD):
        return C.MODEL_OVERLOADED
    if _has(text, _AUTH):
        return C.AUTH_INVALID
    if _has(text, ("model_not_found", "does not exist")):
        return C.MODEL_NOT_FOUND
    if _has(text, ("timeout", "timed out")):
        return C.NETWORK_TIMEOUT
    return C.UNKNOWN


def _status_in(err: dict[str, Any]) -> int | None:
    """An HTTP status carried in an in-band error (OpenRouter/vLLM put it in ``code``)."""
    for key in ("code", "status"):
        value = err.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 400 <= value <= 599:
            return value
        if isinstance(value, str) and value.isdigit() and 400 <= int(value) <= 599:
            return int(value)
    return None


def _error_text(data: Any, provider_code: str | None) -> str:
    """The error's ``code`` and ``type`` together (DeepSeek's ``code`` is always ``invalid_request_error``; its
    ``type`` says more)."""
    err = data.get("error", data) if isinstance(data, dict) else None
    parts = [provider_code or ""]
    if isinstance(err, dict):
        parts += [str(err.get(k)) for k in ("code", "type") if err.get(k)]
    return " ".join(parts)


def _retryable(code: MetonaErrorCode, status: int, provider_code: str | None) -> bool:
    return retryable_for(code, status) or (
        code is C.UNKNOWN and (provider_code or "") in ("server_error", "internal_error")
    )


def _unknown_spec(model_id: str, item: dict[str, Any]) -> ModelSpec:
    context = ModelSpec.CONSERVATIVE_CONTEXT
    for key in ("context_length", "context_window", "max_model_len"):
        value = _count(item.get(key))
        if value:
            context = value
            break
    metadata = {"owned_by": item["owned_by"]} if isinstance(item.get("owned_by"), str) else {}
    return ModelSpec(model_id, model_id, context, min(ModelSpec.CONSERVATIVE_OUTPUT, context), metadata=metadata)


def openai_response_format(request: MetonaRequest) -> dict[str, Any] | None:
    """``responseFormat`` (IR extension) as OpenAI's ``response_format``: ``json_object``, or ``json_schema`` with
    the schema (non-strict: the IR's schemas need not meet OpenAI's strict-mode rules)."""
    fmt = request.response_format
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_schema" and fmt.json_schema is not None:
        return {"type": "json_schema", "json_schema": {"name": fmt.name or "answer", "schema": fmt.json_schema}}
    return {"type": "json_object"}


def _common_text(data: str) -> str | None:
    """The text of the common chunk — one choice (index 0) whose delta is only ``{"content": "…"}``, no finish, no
    usage — parsed with orjson (issue 22: json.loads was a tenth of the stream path's time); None for any other
    chunk, which :meth:`OpenAICompatAdapter.parse_stream` reads with json.loads as before (orjson turns integers
    past 64 bits into floats and rejects NaN and lone surrogates: those chunks keep the json module's reading)."""
    try:
        chunk = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if type(chunk) is not dict or chunk.get("usage") is not None:
        return None
    choices = chunk.get("choices")
    if type(choices) is not list or len(choices) != 1:
        return None
    choice = choices[0]
    delta = choice.get("delta") if type(choice) is dict else None
    if type(delta) is not dict or len(delta) != 1 or choice.get("finish_reason") or choice.get("index", 0) != 0:
        return None
    content = delta.get("content")
    return content if type(content) is str else None
