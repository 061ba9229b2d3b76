"""What every HTTP adapter shares: its configuration, the IR surface (send / send_stream / ...), timeouts,
error answers, and the image helpers. A vendor adapter fills in the payload and the parsing hooks.

The IR methods never raise for an upstream failure: ``send`` and ``send_stream`` return a MetonaResponse with
``finishReason: "error"`` and ``error`` set (and a stream ends ``error`` · ``done``). The retry/failover layer
(:mod:`.service`) drives the lower-level :meth:`BaseAdapter.run`, which raises :class:`ProviderError` and leaves
closing the stream to its caller, so that a retry before any visible output is invisible on the wire.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar

import anyio

from ..core.redact import cut_credentials, redact_head
from ..ir import MetonaErrorCode, MetonaMessage, MetonaModelInfo, MetonaRequest, MetonaResponse
from ..ir.adapter import StreamEventCallback
from . import _http
from .capabilities import ModelSpec
from .errors import (
    ProviderError,
    code_for_status,
    json_body,
    provider_error,
    retry_after_ms,
    retryable_for,
    safe_message,
)
from .stream import Emit, StreamAssembler

if TYPE_CHECKING:
    import httpx

logger = logging.getLogger(__name__)

MAX_IMAGE_BYTES = 20 * 1024 * 1024
MALFORMED = (ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError)
"""What parsing a vendor's malformed or oddly shaped answer raises (RecursionError: JSON nested absurdly deep)."""


@dataclass(frozen=True)
class ProviderConfig:
    """One configured provider instance (a row of ``providers/*``), with its decrypted key in memory only."""

    provider_id: str
    preset: str
    protocol: str
    base_url: str
    api_key: str | None = field(default=None, repr=False)
    default_model: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    models: tuple[ModelSpec, ...] = ()


class BaseAdapter:
    """The IR adapter surface over an httpx client; subclasses speak one vendor protocol."""

    protocol: ClassVar[str]
    stream_path: ClassVar[str]
    send_path: ClassVar[str]

    def __init__(self, config: ProviderConfig, *, transport: Any = None, client: httpx.AsyncClient | None = None):
        key = config.api_key
        if key is not None and key != key.strip():  # pasted with a line break: not a valid header value
            config = replace(config, api_key=key.strip() or None)
        self.config = config
        self._transport = transport
        self._client = client
        self._running = 0
        self._retired = False
        """aclose() was called while calls were running: the last one to end closes the client."""

    # ---- IMetonaProviderAdapter ------------------------------------------------------------------------

    @property
    def provider_id(self) -> str:
        return self.config.provider_id

    @property
    def supported_models(self) -> list[str]:
        return [m.id for m in self.config.models]

    def get_context_window(self, model: str) -> int:
        spec = self.model_spec(model)
        return spec.context_window if spec else ModelSpec.CONSERVATIVE_CONTEXT

    async def health_check(self) -> bool:
        try:
            await self.list_models()
        except ProviderError:
            return False
        return True

    async def send(self, request: MetonaRequest, *, model: str | None = None) -> MetonaResponse:
        return await self._collect(request, model, None)

    async def send_stream(
        self, request: MetonaRequest, on_event: StreamEventCallback, *, model: str | None = None
    ) -> MetonaResponse:
        return await self._collect(request, model, on_event)

    async def list_models(self) -> list[MetonaModelInfo]:
        return [spec.to_ir(self.config.provider_id) for spec in await self.model_specs()]

    async def model_specs(self) -> list[ModelSpec]:
        """The provider's models (the phase-2 ``providers/models`` view): the configured ones, unless the vendor
        lists its own (adapters override this)."""
        return list(self.config.models)

    async def request_json(
        self, method: str, path: str, *, body: Any = None, params: Mapping[str, Any] | None = None
    ) -> Any:
        """A small JSON request beside the chat calls (model lists, versions), its errors mapped like theirs."""
        client = self.client()
        url = self.config.base_url.rstrip("/") + path
        with _http.transport_errors(self.config.provider_id):
            response = await client.request(method, url, json=body, params=params, headers=self.headers())
        if response.status_code >= 400:
            content = response.content[: _http.MAX_ERROR_BODY]
            raise self.error_from_response(response.status_code, response.headers, content)
        data = json_body(response.content)
        if data is None:
            raise self.protocol_error(f"{path}: the answer is not JSON", interrupted=False)
        return data

    # ---- the engine ------------------------------------------------------------------------------------

    def assembler(self, request: MetonaRequest, model: str, emit: Emit | None) -> StreamAssembler:
        meta = request.meta
        return StreamAssembler(
            provider=self.config.provider_id,
            model=model,
            request_id=meta.request_id,
            session_id=meta.session_id,
            iteration=meta.iteration,
            emit=emit,
            think_tags=self.think_tags,
        )

    @property
    def think_tags(self) -> bool:
        return False

    def resolve_model(self, model: str | None) -> str:
        chosen = model or self.config.default_model
        if not chosen:
            raise provider_error(
                MetonaErrorCode.MODEL_NOT_FOUND,
                f"{self.config.provider_id}: no model given and the provider has no default_model",
                self.config.provider_id,
                retryable=False,
            )
        return chosen

    def resolve_model_or_none(self, model: str | None) -> str | None:
        return model or self.config.default_model

    def model_spec(self, model: str) -> ModelSpec | None:
        for spec in self.config.models:
            if spec.id == model:
                return spec
        return None

    async def _collect(self, request: MetonaRequest, model: str | None, emit: Emit | None) -> MetonaResponse:
        chosen = model or self.config.default_model or ""
        asm = self.assembler(request, chosen, emit)
        try:
            await self.run(request, chosen or None, asm, stream=emit is not None)
            return await asm.done()  # may still fail: a pending tool call's arguments are checked here
        except ProviderError as exc:
            return await asm.fail(exc.error)

    async def run(
        self,
        request: MetonaRequest,
        model: str | None,
        asm: StreamAssembler,
        *,
        stream: bool,
        deadline: float | None = None,
    ) -> None:
        """One upstream call feeding ``asm``; raises ProviderError; does not close ``asm``.

        ``request.constraints.timeoutMs`` bounds the whole call (IR code ``timeout``); a caller that retries
        passes the ``deadline`` (``anyio.current_time()`` based) of the first attempt instead, so that the
        timeout bounds the request, not each attempt.
        """
        self._running += 1
        try:
            await self._run(request, model, asm, stream, deadline)
        finally:
            self._running -= 1
            if self._retired and not self._running:
                with anyio.CancelScope(shield=True):
                    await self._close_client()

    async def _run(
        self, request: MetonaRequest, model: str | None, asm: StreamAssembler, stream: bool, deadline: float | None
    ) -> None:
        chosen = self.resolve_model(model)
        asm.model = chosen
        timeout_ms = request.constraints.timeout_ms if request.constraints else None
        if deadline is None:
            if not timeout_ms:
                await self._call(request, chosen, asm, stream)
                return
            deadline = anyio.current_time() + timeout_ms / 1000
        with anyio.move_on_at(deadline) as scope:
            await self._call(request, chosen, asm, stream)
        if scope.cancelled_caught:
            raise provider_error(
                MetonaErrorCode.TIMEOUT,
                f"{self.config.provider_id}: no complete answer within timeoutMs={timeout_ms}",
                self.config.provider_id,
                retryable=False,
                interrupted=asm.visible,
            )

    async def _call(self, request: MetonaRequest, model: str, asm: StreamAssembler, stream: bool) -> None:
        request = wire_request(request, asm)  # tool names the vendor accepts; calls mapped back by the assembler
        payload = await self.build_payload(request, model, stream=stream)
        client = self.client()
        url = self.url(self.stream_path if stream else self.send_path, model)
        provider = self.config.provider_id
        with _http.transport_errors(provider):
            request_ = client.build_request("POST", url, json=payload, headers=self.headers())
            response = await client.send(request_, stream=True)
        finished = False
        try:
            if response.status_code >= 400:
                with _http.transport_errors(provider):
                    body = await _http.read_error_body(response)
                raise self.error_from_response(response.status_code, response.headers, body)
            if stream:
                await self._consume_stream(response, asm)
            else:
                with _http.transport_errors(provider):
                    body = await response.aread()
                data = json_body(body)
                if not isinstance(data, dict):
                    raise self.protocol_error("the answer is not a JSON object", interrupted=False)
                try:
                    await self.parse_body(data, asm)
                except MALFORMED as exc:
                    why = f"unexpected answer ({type(exc).__name__}: {safe_message(str(exc), 200)})"
                    raise self.protocol_error(why, interrupted=False) from None
            finished = True
        finally:
            if not finished:
                await _abort(response)
            else:
                await response.aclose()

    async def _consume_stream(self, response: httpx.Response, asm: StreamAssembler) -> None:
        provider = self.config.provider_id
        _http.coalesce_chunks(response)  # every whole HTTP chunk at hand in one piece (issue 22: h11 paid per chunk)
        chunks = response.aiter_raw()
        try:
            with _http.transport_errors(provider, started=True):
                await self.parse_stream(chunks, asm)
        except MALFORMED as exc:
            # malformed SSE/NDJSON or a chunk of an unexpected shape
            why = f"malformed stream ({type(exc).__name__}: {safe_message(str(exc), 200)})"
            raise self.protocol_error(why) from None

    def protocol_error(self, why: str, *, interrupted: bool = True) -> ProviderError:
        return provider_error(
            MetonaErrorCode.INVALID_RESPONSE,
            f"{self.config.provider_id}: {why}",
            self.config.provider_id,
            retryable=False,
            interrupted=interrupted,
        )

    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = _http.make_client(self._transport)
        return self._client

    async def aclose(self) -> None:
        """Close the client; while calls run on it (a provider updated mid-answer), when the last one ends."""
        if self._running:
            self._retired = True
            return
        await self._close_client()

    async def _close_client(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def url(self, path: str, model: str) -> str:
        return self.config.base_url.rstrip("/") + path

    # ---- hooks -------------------------------------------------------------------------------------------

    def headers(self) -> dict[str, str]:
        return {}

    async def build_payload(self, request: MetonaRequest, model: str, *, stream: bool) -> dict[str, Any]:
        raise NotImplementedError

    async def parse_stream(self, chunks: Any, asm: StreamAssembler) -> None:
        """Feed ``asm`` from the raw byte chunks of a streaming answer (use ``_http.iter_sse``/``iter_ndjson``)."""
        raise NotImplementedError

    async def parse_body(self, data: dict[str, Any], asm: StreamAssembler) -> None:
        """Feed ``asm`` from a non-streaming JSON answer."""
        raise NotImplementedError

    def error_from_response(self, status: int, headers: Mapping[str, str], body: bytes) -> ProviderError:
        """The vendor's HTTP error answer as a ProviderError; adapters refine :meth:`classify_error`."""
        data = json_body(body)
        message, provider_code = self.error_details(data, body)
        message = self.redact(message)
        code = self.classify_error(status, provider_code, message)
        return provider_error(
            code,
            f"{self.config.provider_id}: HTTP {status}: {safe_message(message)}",
            self.config.provider_id,
            retryable=retryable_for(code, status),
            provider_code=provider_code or str(status),
            retry_after_ms=retry_after_ms(headers),
            status=status,
        )

    def redact(self, text: str) -> str:
        """``text`` without the API key (a vendor or proxy may echo it back in an error message)."""
        return cut_credentials(text, (self.config.api_key or "",))

    def error_details(self, data: Any, body: bytes) -> tuple[str, str | None]:
        """(message, vendor error code) from an error body."""
        if isinstance(data, dict):
            err = data.get("error", data)
            if isinstance(err, dict):
                message = err.get("message") or err.get("error") or ""
                code = err.get("code") or err.get("type")
                return str(message) or "error", (str(code) if code else None)
            if isinstance(err, str):
                return err, None
        text = body.decode("utf-8", "replace").strip()
        return (redact_head(text, 200, (self.config.api_key or "",)) or "empty error body"), None

    def classify_error(self, status: int, provider_code: str | None, message: str) -> MetonaErrorCode:
        return code_for_status(status)

    # ---- images ------------------------------------------------------------------------------------------

    async def image_bytes(self, url: str) -> tuple[str, bytes]:
        """(mime type, bytes) of an image given as a ``data:`` URI or an http(s) URL (downloaded, bounded)."""
        if url.startswith("data:"):
            header, _, payload = url.partition(",")
            mime = header[5:].split(";")[0] or "application/octet-stream"
            if ";base64" not in header:
                raise self.request_error("only base64 data URIs are supported for images")
            try:
                return mime, base64.b64decode(payload, validate=True)
            except (binascii.Error, ValueError):
                raise self.request_error("an image data URI is not valid base64") from None
        if not url.startswith(("http://", "https://")):
            raise self.request_error("an image URL must be http(s) or a data: URI")
        client = self.client()
        with _http.transport_errors(self.config.provider_id):
            async with client.stream("GET", url) as response:
                if response.status_code >= 400:
                    raise self.request_error(f"downloading an image failed: HTTP {response.status_code}")
                data = b""
                async for chunk in response.aiter_bytes():
                    data += chunk
                    if len(data) > MAX_IMAGE_BYTES:
                        raise self.request_error("an image is larger than 20 MiB")
                mime = response.headers.get("content-type", "image/png").split(";")[0]
        return mime, data

    def request_error(self, why: str) -> ProviderError:
        return provider_error(
            MetonaErrorCode.UNKNOWN,
            f"{self.config.provider_id}: {why}",
            self.config.provider_id,
            retryable=False,
            provider_code="invalid_request",
        )


async def _abort(response: httpx.Response) -> None:
    """Close an unfinished answer's connection now, also when we are being cancelled.

    A cancellation that lands inside httpcore's read also cancels httpcore's own clean-up, leaving the
    socket open — and the server generating (and billing) tokens nobody reads. Closing the network stream
    itself, shielded and bounded, hangs up at once.
    """
    with anyio.CancelScope(shield=True), anyio.move_on_after(1.0):
        stream = response.extensions.get("network_stream")
        if stream is not None:
            try:
                await stream.aclose()
            except Exception:  # already closed or broken: the goal is reached either way
                logger.debug("closing an aborted stream failed", exc_info=True)
        await response.aclose()


def wire_request(request: MetonaRequest, asm: StreamAssembler) -> MetonaRequest:
    """``request`` with every tool name in a form all vendors accept (``plugin.tool`` → ``plugin__tool``); the
    assembler learns the way back. Unchanged (the same object) when every name is already valid."""
    from .toolnames import request_names

    names = {k: v for k, v in request_names(request).items() if k != v}
    if not names:
        return request
    asm.tool_names = {v: k for k, v in names.items()}
    tools = [t.model_copy(update={"name": names.get(t.name, t.name)}) for t in request.tools or ()]
    messages = []
    for m in request.messages:
        update: dict[str, Any] = {}
        if m.tool_calls:
            update["tool_calls"] = [c.model_copy(update={"name": names.get(c.name, c.name)}) for c in m.tool_calls]
        if m.tool_result is not None and m.tool_result.tool_name in names:
            update["tool_result"] = m.tool_result.model_copy(update={"tool_name": names[m.tool_result.tool_name]})
        messages.append(m.model_copy(update=update) if update else m)
    return request.model_copy(update={"tools": tools if request.tools is not None else None, "messages": messages})


def system_text(request: MetonaRequest) -> str:
    """The four system prompt sections as one system message (empty sections skipped)."""
    sp = request.system_prompt
    parts = [sp.role_definition, sp.output_constraints, sp.safety_guidelines, sp.dynamic_reminders or ""]
    return "\n\n".join(p.strip() for p in parts if p and p.strip())


def last_user_text(messages: list[MetonaMessage]) -> str:
    """The newest ``user`` message's text (the task of a turn), or ``""``."""
    for message in reversed(messages):
        if message.role == "user":
            return message.content
    return ""


def tool_text(message: MetonaMessage) -> str:
    """What the model reads of a ``tool`` message: the summary (IR: "供 LLM 阅读"), else the message text, else the
    error of a failed call, else the raw result (JSON unless a string)."""
    result = message.tool_result
    if result is None:
        return message.content
    if result.summary:
        return result.summary
    if message.content:
        return message.content
    if not result.success and result.error:
        return f"Error: {result.error}"
    if isinstance(result.result, str):
        return result.result
    return json.dumps(result.result, ensure_ascii=False, default=str)


def tools_allowed(request: MetonaRequest) -> list[Any]:
    """``request.tools`` filtered by ``constraints.allowedTools`` (None = all)."""
    tools = request.tools or []
    allowed = request.constraints.allowed_tools if request.constraints else None
    if allowed is None:
        return list(tools)
    keep = set(allowed)
    return [t for t in tools if t.name in keep]
