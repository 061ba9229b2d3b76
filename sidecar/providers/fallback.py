"""Retry + failover as a wrapper provider around adapters, the way pydantic-ai's ``FallbackModel`` wraps models.

The wrapper is built per call by :class:`~sidecar.providers.service.ProviderService` (which owns the records,
keys and cached adapters) and follows the IR's 故障转移 table:
1. a retryable MetonaError is retried after ``retryAfterMs`` (capped; exponential backoff when absent), at most
   ``llm.maxRetries`` times (default 3);
2. then, if a fallback is configured (``llm.fallbackProvider``, resolved only when it is needed), the request goes
   to it with the same retries;
3. a switch is announced with the notification ``agent/providerSwitched {from_provider, to_provider, model, reason}``;
4. otherwise the error is returned.
Nothing is retried or failed over once a stream has shown output (it would duplicate text): the stream ends
``error`` · ``done`` instead. Unlike ``FallbackModel`` (which tries each of its models in turn), there is one
fallback and only errors another provider may not have (:data:`FAILOVER_CODES`) fail over.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from ..ir import MetonaError, MetonaErrorCode, MetonaRequest, MetonaResponse
from .base import BaseAdapter
from .errors import ProviderError
from .models import ProviderSwitchedParams
from .stream import Emit, StreamAssembler

logger = logging.getLogger(__name__)

Notify = Callable[[str, Any], Awaitable[None]]
Observe = Callable[[str, dict[str, Any]], Awaitable[None]]
"""Hears retries and failovers of a call: ``observe("retry" | "failover", data)``."""
Fallback = tuple[BaseAdapter, str | None]
"""The adapter to fail over to and the model to ask it for (None: its default)."""
PROVIDER_SWITCHED = "agent/providerSwitched"

RETRY_BASE_S = 0.5
RETRY_MAX_WAIT_S = 30.0
"""A Retry-After longer than this is not waited for: the error goes on to failover (or back to the caller)."""

FAILOVER_CODES = frozenset(
    {
        MetonaErrorCode.NETWORK_TIMEOUT,
        MetonaErrorCode.NETWORK_ERROR,
        MetonaErrorCode.AUTH_INVALID,
        MetonaErrorCode.AUTH_EXPIRED,
        MetonaErrorCode.RATE_LIMITED,
        MetonaErrorCode.QUOTA_EXCEEDED,
        MetonaErrorCode.MODEL_OVERLOADED,
        MetonaErrorCode.MODEL_NOT_FOUND,
        MetonaErrorCode.UNKNOWN,
    }
)
"""Errors that another provider may not have. Not failed over: the request's own faults (context length,
content filter), malformed answers, the caller's timeout or cancel."""


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int
    base_s: float = RETRY_BASE_S

    def backoff(self, attempt: int, retry_after_ms: int | None) -> float:
        if retry_after_ms is not None:
            return retry_after_ms / 1000
        base = self.base_s * (2**attempt)
        return base + random.uniform(0, base / 4)


class FallbackProvider:
    """``primary`` (the adapter of ``provider_id``) with retries, then the fallback ``resolve_fallback(primary_model)``
    names (if any).

    ``check(adapter)`` runs before each attempt (raises a ProviderError, e.g. a missing key); ``release(adapter)``
    closes a fallback adapter after its use unless it is a cached one.
    """

    def __init__(
        self,
        provider_id: str,
        primary: BaseAdapter,
        resolve_fallback: Callable[[str | None], Awaitable[Fallback | None]],
        *,
        policy: RetryPolicy,
        check: Callable[[BaseAdapter], None],
        release: Callable[[BaseAdapter], Awaitable[None]],
    ) -> None:
        self._provider_id = provider_id
        self._primary = primary
        self._resolve_fallback = resolve_fallback
        self._policy = policy
        self._check = check
        self._release = release

    async def chat(
        self,
        model: str | None,
        request: MetonaRequest,
        *,
        emit: Emit | None = None,
        notify: Notify | None = None,
        observe: Observe | None = None,
    ) -> MetonaResponse:
        """Send ``request``; raise the last ProviderError when every attempt failed.

        ``constraints.timeoutMs`` bounds the whole call, retries and failover included.
        """
        primary, pid = self._primary, self._provider_id
        timeout_ms = request.constraints.timeout_ms if request.constraints else None
        deadline = anyio.current_time() + timeout_ms / 1000 if timeout_ms else None
        asm, exc = await self._attempts(primary, model, request, emit, deadline, observe)
        if exc is None:
            return await asm.done()
        if (
            not asm.visible
            and exc.error.code in FAILOVER_CODES
            and (deadline is None or anyio.current_time() < deadline)
        ):
            fallback: Fallback | None = None
            try:
                fallback = await self._resolve_fallback(primary.resolve_model_or_none(model))
                if fallback is not None:
                    await _announce(pid, fallback, exc, notify, observe)
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True):  # cancelled between two attempts: the stream still ends
                    await asm.fail(_aborted(pid))
                    if fallback is not None:
                        await self._release(fallback[0])
                raise
            if fallback is not None:
                adapter, fallback_model = fallback
                logger.warning("provider %s failed (%s); failing over to %s", pid, exc.error.code, adapter.provider_id)
                try:
                    asm, exc = await self._attempts(adapter, fallback_model, request, emit, deadline, observe)
                finally:
                    with anyio.CancelScope(shield=True):  # also when cancelled: close a one-off adapter
                        await self._release(adapter)
                if exc is None:
                    return await asm.done()
        await asm.fail(exc.error)
        raise exc

    async def _attempts(
        self,
        adapter: BaseAdapter,
        model: str | None,
        request: MetonaRequest,
        emit: Emit | None,
        deadline: float | None = None,
        observe: Observe | None = None,
    ) -> tuple[StreamAssembler, ProviderError | None]:
        """Run with retries; return the assembler of the last attempt (still open) and its error, if any.

        No retry starts (and no backoff is waited for) past ``deadline``: the last error is returned instead.
        """
        max_retries = self._policy.max_retries
        attempt = 0
        while True:
            asm = adapter.assembler(request, model or adapter.config.default_model or "", emit)
            try:
                self._check(adapter)
                await adapter.run(request, model, asm, stream=emit is not None, deadline=deadline)
                return asm, None
            except ProviderError as exc:
                exc.error.message = adapter.redact(exc.error.message)
                if asm.visible or not exc.retryable or attempt >= max_retries:
                    return asm, exc
                wait_s = self._policy.backoff(attempt, exc.error.retry_after_ms)
                if wait_s > RETRY_MAX_WAIT_S:
                    return asm, exc
                if deadline is not None and anyio.current_time() + wait_s >= deadline:
                    return asm, exc
                logger.info(
                    "%s: %s, retry %d/%d in %.2f s",
                    adapter.provider_id,
                    exc.error.code,
                    attempt + 1,
                    max_retries,
                    wait_s,
                )
                attempt += 1
                if observe is not None:
                    await observe(
                        "retry",
                        {
                            "provider_id": adapter.provider_id,
                            "attempt": attempt,
                            "max_retries": max_retries,
                            "wait_ms": round(wait_s * 1000),
                            "error": exc.error.model_dump(mode="json"),
                        },
                    )
                await anyio.sleep(wait_s)
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True):
                    await asm.fail(_aborted(adapter.provider_id))
                raise
            except Exception:
                # Not a provider failure (a bug here, or emit itself failing): the stream still ends with
                # error + done where it can, and the request answers an internal error.
                if not asm.closed:
                    with anyio.CancelScope(shield=True):
                        try:
                            await asm.fail(_internal(adapter.provider_id))
                        except Exception:
                            logger.debug("could not close the stream after an internal error", exc_info=True)
                raise


async def _announce(
    from_provider: str, fallback: Fallback, exc: ProviderError, notify: Notify | None, observe: Observe | None
) -> None:
    """``agent/providerSwitched`` to the host, ``failover`` to the observer (the agent's trace)."""
    adapter, fallback_model = fallback
    to_model = fallback_model or adapter.config.default_model or ""
    if notify is not None:
        await notify(
            PROVIDER_SWITCHED,
            ProviderSwitchedParams(
                from_provider=from_provider,
                to_provider=adapter.config.provider_id,
                model=to_model,
                reason=exc.error.code.value,
            ).model_dump(mode="json"),
        )
    if observe is not None:
        await observe(
            "failover",
            {
                "from_provider": from_provider,
                "to_provider": adapter.config.provider_id,
                "model": to_model,
                "error": exc.error.model_dump(mode="json"),
            },
        )


def _internal(provider: str) -> MetonaError:
    return MetonaError(
        code=MetonaErrorCode.UNKNOWN, message="internal error in the sidecar", provider=provider, retryable=False
    )


def _aborted(provider: str) -> MetonaError:
    return MetonaError(
        code=MetonaErrorCode.USER_ABORTED, message="the request was cancelled", provider=provider, retryable=False
    )
