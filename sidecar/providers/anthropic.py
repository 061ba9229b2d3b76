"""The Anthropic Messages API (``POST /v1/messages``), used by the ``anthropic`` preset and by Agnes AI's
Anthropic-compatible protocol (same wire format).

Request (IR → wire):

* the four system prompt sections (and any ``system`` history message) → the top-level ``system`` string;
* messages alternate user/assistant: consecutive same-role messages are merged into one message of content
  blocks; ``tool`` results become ``tool_result`` blocks of a user message (all results of a turn in one);
  assistant tool calls → ``tool_use`` blocks; images → ``image`` blocks (base64 for data URIs, ``url`` sources
  for http(s) URLs);
* a signed assistant ``reasoningContent`` goes back as a leading ``thinking`` block when thinking is on (the API
  requires it in a tool-use cycle); an unsigned one is dropped, never sent unsigned. When the tool-use cycle in
  progress has no signed thinking to send back, thinking is turned off for that request (else the API answers
  400 "Expected `thinking` or `redacted_thinking`");
* thinking per the seed's table (Agnes Anthropic-compatible row): low 1024 / medium 2048 / high 4096 / max 8192
  ``budget_tokens``; ``max_tokens`` is raised above the budget; temperature (and a ``top_p`` below 0.95) are not
  sent with thinking on (the API rejects them);
* ``max_tokens`` is required: the request's, else the model's output limit capped at 8192 (4096 when unknown).

Usage: Anthropic's ``input_tokens`` excludes cached input, so ``inputTokens`` = input + cache read + cache
creation, ``cacheHitTokens`` = cache read, ``cacheMissTokens`` = input + cache creation.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from ..ir import MetonaErrorCode, MetonaFinishReason, MetonaRequest, MetonaTokenUsage
from . import _http
from .base import BaseAdapter, system_text, tools_allowed
from .capabilities import ModelSpec
from .errors import (
    ProviderError,
    code_for_status,
    provider_error,
    retryable_for,
    safe_message,
)

if TYPE_CHECKING:
    from ..ir import MetonaMessage
    from .stream import StreamAssembler

C = MetonaErrorCode
F = MetonaFinishReason

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS_CAP = 8192
THINKING_BUDGETS = {"low": 1024, "medium": 2048, "high": 4096, "max": 8192}
"""IR 🧠 Thinking 模式 Provider 映射表, Agnes (Anthropic 兼容) row, applied to Anthropic too."""
DEFAULT_THINKING_EFFORT = "medium"
THINKING_MIN_TOP_P = 0.95
"""With thinking on, the API accepts ``top_p`` only between 0.95 and 1."""
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
MAX_MODEL_PAGES = 10

STOP_REASONS: dict[str, MetonaFinishReason] = {
    "end_turn": F.STOP,
    "stop_sequence": F.STOP,
    "pause_turn": F.STOP,
    "max_tokens": F.LENGTH,
    "model_context_window_exceeded": F.LENGTH,
    "tool_use": F.TOOL_CALLS,
    "refusal": F.CONTENT_FILTER,
}

# Anthropic error ``type`` → (IR code, the HTTP status it comes with); docs.claude.com/en/api/errors
ERROR_TYPES: dict[str, tuple[MetonaErrorCode, int]] = {
    "invalid_request_error": (C.UNKNOWN, 400),
    "authentication_error": (C.AUTH_INVALID, 401),
    "billing_error": (C.QUOTA_EXCEEDED, 402),
    "permission_error": (C.AUTH_INVALID, 403),
    "not_found_error": (C.MODEL_NOT_FOUND, 404),
    "request_too_large": (C.CONTEXT_LENGTH_EXCEEDED, 413),
    "rate_limit_error": (C.RATE_LIMITED, 429),
    "api_error": (C.UNKNOWN, 500),
    "timeout_error": (C.NETWORK_TIMEOUT, 504),
    "overloaded_error": (C.MODEL_OVERLOADED, 529),
}
_CONTEXT_MESSAGES = re.compile(
    r"prompt is too long|exceed(s|ed)? (the )?context|context (window|length)|too many (input )?tokens", re.I
)
_QUOTA_MESSAGES = re.compile(r"credit balance is too low", re.I)
_DATED_SUFFIX = re.compile(r"-(\d{8}|latest)$")


class AnthropicAdapter(BaseAdapter):
    protocol: ClassVar[str] = "anthropic"
    stream_path: ClassVar[str] = "/v1/messages"
    send_path: ClassVar[str] = "/v1/messages"
    models_path: ClassVar[str] = "/v1/models"

    # ---- request -----------------------------------------------------------------------------------------

    def headers(self) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION, "content-type": "application/json"}
        if self.config.api_key:
            headers["x-api-key"] = self.config.api_key
        extra = self.config.options.get("extra_headers")
        if isinstance(extra, Mapping):
            headers.update({str(k): str(v) for k, v in extra.items() if v is not None})
        return headers

    async def build_payload(self, request: MetonaRequest, model: str, *, stream: bool) -> dict[str, Any]:
        params = request.params
        thinking = self._thinking_budget(request)
        messages, extra_system = await self._messages(request, with_thinking=thinking is not None)
        payload: dict[str, Any] = {"model": model, "messages": messages}
        system = "\n\n".join(p for p in (system_text(request), extra_system) if p)
        if system:
            payload["system"] = system

        max_tokens = params.max_tokens or self._default_max_tokens(model)
        if thinking is not None:
            if max_tokens <= thinking:
                max_tokens += thinking
            payload["thinking"] = {"type": "enabled", "budget_tokens": thinking}
            if params.top_p is not None and params.top_p >= THINKING_MIN_TOP_P:
                payload["top_p"] = params.top_p
        elif params.top_p is not None and params.temperature is None:
            # newer Claude models reject temperature and top_p together: an explicit top_p wins over the default
            payload["top_p"] = params.top_p
        else:
            payload["temperature"] = params.temperature if params.temperature is not None else 0.0
        payload["max_tokens"] = max_tokens
        if params.stop_sequences:
            payload["stop_sequences"] = list(params.stop_sequences)

        tools = tools_allowed(request)
        if tools:
            payload["tools"] = [
                {
                    "name": t.name,
                    "description": t.description,
                    "input_schema": t.parameters.model_dump(mode="json", by_alias=True),
                }
                for t in tools
            ]
            max_calls = request.constraints.max_tool_calls if request.constraints else None
            if max_calls == 0:
                payload["tool_choice"] = {"type": "none"}
            elif max_calls == 1:
                payload["tool_choice"] = {"type": "auto", "disable_parallel_tool_use": True}
        if stream:
            payload["stream"] = True
        return payload

    def _thinking_budget(self, request: MetonaRequest) -> int | None:
        params = request.params
        # as in every adapter: an effort alone asks for thinking; an explicit false wins
        if params.thinking_enabled is False or (params.thinking_enabled is None and params.thinking_effort is None):
            return None
        if _open_tool_cycle_unsigned(request.messages):
            return None  # the API would reject the tool_use turn without its signed thinking block
        return THINKING_BUDGETS[params.thinking_effort or DEFAULT_THINKING_EFFORT]

    def _default_max_tokens(self, model: str) -> int:
        spec = self.model_spec(model)
        if spec is None:
            return ModelSpec.CONSERVATIVE_OUTPUT
        return min(spec.max_output_tokens, DEFAULT_MAX_TOKENS_CAP)

    async def _messages(self, request: MetonaRequest, *, with_thinking: bool) -> tuple[list[dict[str, Any]], str]:
        out: list[dict[str, Any]] = []
        system_parts: list[str] = []
        for message in request.messages:
            if message.role == "system":
                if message.content.strip():
                    system_parts.append(message.content.strip())
                continue
            if message.role == "tool":
                role, blocks = "user", [self._tool_result_block(message)]
            elif message.role == "assistant":
                role, blocks = "assistant", self._assistant_blocks(message, with_thinking=with_thinking)
            else:
                role, blocks = "user", await self._user_blocks(message)
            if not blocks:
                continue
            if out and out[-1]["role"] == role:
                out[-1]["content"].extend(blocks)
            else:
                out.append({"role": role, "content": blocks})
        return out, "\n\n".join(system_parts)

    async def _user_blocks(self, message: MetonaMessage) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = [await self._image_block(img.url) for img in message.images or ()]
        if message.content:
            blocks.append({"type": "text", "text": message.content})
        return blocks

    def _assistant_blocks(self, message: MetonaMessage, *, with_thinking: bool) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if with_thinking and message.reasoning_content and message.reasoning_signature:
            blocks.append(
                {"type": "thinking", "thinking": message.reasoning_content, "signature": message.reasoning_signature}
            )
        if message.content:
            blocks.append({"type": "text", "text": message.content})
        for call in message.tool_calls or ():
            blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.args})
        return blocks

    def _tool_result_block(self, message: MetonaMessage) -> dict[str, Any]:
        result = message.tool_result
        if result is None:
            raise self.request_error("a tool message has no toolResult")
        text = result.summary or _result_text(result.result)
        if not result.success and result.error:
            text = f"{result.error}\n\n{text}" if text else result.error
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": result.tool_call_id}
        if text:
            block["content"] = text
        if not result.success:
            block["is_error"] = True
        return block

    async def _image_block(self, url: str) -> dict[str, Any]:
        if url.startswith(("http://", "https://")):
            return {"type": "image", "source": {"type": "url", "url": url}}
        mime, data = await self.image_bytes(url)  # validates the data URI (and rejects other schemes)
        if mime not in IMAGE_TYPES:
            raise self.request_error(f"image type {mime!r} is not supported (jpeg, png, gif, webp)")
        encoded = base64.b64encode(data).decode("ascii")
        return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": encoded}}

    # ---- streaming answer --------------------------------------------------------------------------------

    async def parse_stream(self, chunks: Any, asm: StreamAssembler) -> None:
        usage: dict[str, Any] = {}
        blocks: dict[int, str] = {}
        stopped = False
        async for sse in _http.iter_sse(chunks):
            data = json.loads(sse.data)
            if not isinstance(data, dict):
                raise ValueError("an event is not a JSON object")
            kind = data.get("type") or sse.event
            if kind == "content_block_delta":
                index = int(data["index"])
                delta = data["delta"]
                dtype = delta.get("type")
                if dtype == "text_delta":
                    await asm.text(delta["text"])
                elif dtype == "thinking_delta":
                    await asm.reasoning(delta["thinking"])
                elif dtype == "signature_delta":
                    asm.signature(delta["signature"])
                elif dtype == "input_json_delta":
                    if blocks.get(index) == "tool_use":
                        await asm.tool_delta(index, args=delta["partial_json"])
            elif kind == "content_block_start":
                index = int(data["index"])
                block = data["content_block"]
                btype = blocks[index] = str(block.get("type"))
                if btype == "tool_use":
                    # Anthropic starts with ``input: {}`` and streams the arguments; a compatible server may
                    # put the whole input here instead
                    whole = block.get("input")
                    args = json.dumps(whole, ensure_ascii=False) if whole else None
                    await asm.tool_delta(index, id=block.get("id"), name=block["name"], args=args)
                elif btype == "text" and block.get("text"):
                    await asm.text(block["text"])
                elif btype == "thinking":
                    if block.get("thinking"):
                        await asm.reasoning(block["thinking"])
                    if block.get("signature"):
                        asm.signature(block["signature"])
            elif kind == "content_block_stop":
                index = int(data["index"])
                if blocks.get(index) == "tool_use":
                    await asm.complete_tool(index)
            elif kind == "message_start":
                message = data["message"]
                usage.update(message.get("usage") or {})
                if usage:
                    asm.usage(_usage(usage))
            elif kind == "message_delta":
                reason = STOP_REASONS.get((data.get("delta") or {}).get("stop_reason") or "")
                if reason is not None:
                    asm.finish(reason)
                usage.update(data.get("usage") or {})
                if usage:
                    asm.usage(_usage(usage))
            elif kind == "message_stop":
                stopped = True
                break
            elif kind == "error":
                raise self._error_event(data.get("error"))
            # ping and unknown event types are ignored (the API may add new ones)
        if not stopped:
            raise provider_error(
                C.NETWORK_ERROR,
                f"{self.config.provider_id}: the stream ended before message_stop",
                self.config.provider_id,
                interrupted=True,
            )

    def _error_event(self, error: Any, *, interrupted: bool = True) -> ProviderError:
        """An in-band ``{"type": "error", "error": {"type", "message"}}`` (no HTTP status: the type implies one)."""
        etype = str(error.get("type") or "") if isinstance(error, dict) else ""
        message = str(error.get("message") or "") if isinstance(error, dict) else ""
        status = ERROR_TYPES.get(etype, (C.UNKNOWN, 500))[1]
        code = self.classify_error(status, etype or None, message)
        return provider_error(
            code,
            f"{self.config.provider_id}: {etype or 'error'}: {safe_message(message or 'no message')}",
            self.config.provider_id,
            retryable=retryable_for(code, status),
            provider_code=etype or None,
            interrupted=interrupted,
        )

    # ---- non-streaming answer ----------------------------------------------------------------------------

    async def parse_body(self, data: dict[str, Any], asm: StreamAssembler) -> None:
        if data.get("type") == "error":
            raise self._error_event(data.get("error"), interrupted=False)
        content = data.get("content")
        if not isinstance(content, list):
            raise self.protocol_error("the answer has no content list", interrupted=False)
        for block in content:
            if not isinstance(block, dict):
                raise self.protocol_error("a content block is not an object", interrupted=False)
            btype = block.get("type")
            if btype == "text":
                await asm.text(str(block.get("text") or ""))
            elif btype == "thinking":
                await asm.reasoning(str(block.get("thinking") or ""))
                if block.get("signature"):
                    asm.signature(str(block["signature"]))
            elif btype == "tool_use":
                name = block.get("name")
                if not isinstance(name, str):
                    raise self.protocol_error("a tool_use block has no name", interrupted=False)
                await asm.tool_call(name=name, args=block.get("input", {}), id=block.get("id"))
        usage = data.get("usage")
        if isinstance(usage, dict):
            asm.usage(_usage(usage))
        reason = STOP_REASONS.get(str(data.get("stop_reason") or ""))
        if reason is not None:
            asm.finish(reason)

    # ---- errors ------------------------------------------------------------------------------------------

    def classify_error(self, status: int, provider_code: str | None, message: str) -> MetonaErrorCode:
        if _CONTEXT_MESSAGES.search(message):
            return C.CONTEXT_LENGTH_EXCEEDED
        if _QUOTA_MESSAGES.search(message):
            return C.QUOTA_EXCEEDED
        known = ERROR_TYPES.get(provider_code or "")
        if known is not None:
            return known[0]
        return code_for_status(status)

    # ---- models ------------------------------------------------------------------------------------------

    def model_spec(self, model: str) -> ModelSpec | None:
        """The known spec of ``model``; a dated id (``claude-sonnet-4-5-20250929``) matches its alias."""
        exact = super().model_spec(model)
        if exact is not None:
            return exact
        alias = _DATED_SUFFIX.sub("", model)
        return super().model_spec(alias) if alias != model else None

    async def model_specs(self) -> list[ModelSpec]:
        """``GET /v1/models`` merged with the preset's known models; unknown ids get conservative capabilities."""
        listed = await self._fetch_models()
        specs: list[ModelSpec] = []
        seen: set[str] = set()
        for model_id, display_name in listed:
            if model_id in seen:
                continue
            seen.add(model_id)
            known = self.model_spec(model_id)
            if known is None:
                specs.append(ModelSpec(model_id, display_name or model_id))
            elif known.id == model_id:
                specs.append(known)
            else:
                specs.append(
                    ModelSpec(
                        model_id,
                        display_name or known.display_name,
                        known.context_window,
                        known.max_output_tokens,
                        known.capabilities,
                        known.deprecated,
                        dict(known.metadata),
                    )
                )
        specs.extend(spec for spec in self.config.models if spec.id not in seen)
        return specs

    async def _fetch_models(self) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        after: str | None = None
        for _ in range(MAX_MODEL_PAGES):
            query: dict[str, str | int] = {"limit": 1000}
            if after:
                query["after_id"] = after
            data = await self.request_json("GET", self.models_path, params=query)
            items = data.get("data") if isinstance(data, dict) else None
            if not isinstance(items, list):
                raise self.protocol_error("the model list has no data array", interrupted=False)
            for item in items:
                if isinstance(item, dict) and isinstance(item.get("id"), str):
                    found.append((item["id"], str(item.get("display_name") or "")))
            after = data.get("last_id") if data.get("has_more") else None
            if not isinstance(after, str) or not after:
                break
        return found


# ---- helpers -------------------------------------------------------------------------------------------------


def _usage(raw: Mapping[str, Any]) -> MetonaTokenUsage:
    fresh = int(raw.get("input_tokens") or 0)
    read = raw.get("cache_read_input_tokens")
    created = raw.get("cache_creation_input_tokens")
    output = int(raw.get("output_tokens") or 0)
    total_input = fresh + int(read or 0) + int(created or 0)
    cached = read is not None or created is not None
    details = raw.get("output_tokens_details")
    reasoning = details.get("thinking_tokens") if isinstance(details, dict) else None
    return MetonaTokenUsage(
        input_tokens=total_input,
        output_tokens=output,
        total_tokens=total_input + output,
        reasoning_tokens=int(reasoning) if reasoning is not None else None,
        cache_hit_tokens=int(read or 0) if cached else None,
        cache_miss_tokens=fresh + int(created or 0) if cached else None,
    )


def _result_text(result: Any) -> str:
    if result is None:
        return ""
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(result)


def _open_tool_cycle_unsigned(messages: list[MetonaMessage]) -> bool:
    """True when the last assistant turn called tools, only tool results follow, and it has no signed thinking."""
    for message in reversed(messages):
        if message.role == "tool":
            continue
        if message.role != "assistant" or not message.tool_calls:
            return False
        return not (message.reasoning_content and message.reasoning_signature)
    return False
