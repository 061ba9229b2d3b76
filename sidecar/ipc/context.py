"""What a handler may do besides returning: notify, write stream lines, act after its answer."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

logger = logging.getLogger(__name__)

RequestId = int | str | None


class Outbox(Protocol):
    """The single writer of fd 1, as handlers see it."""

    async def send_notification(self, method: str, params: Any) -> None: ...

    async def send_line(self, line: bytes) -> None:
        """A pre-serialised line without its newline (MetonaStreamEvent lines)."""
        ...


@dataclass
class RequestContext:
    request_id: RequestId
    method: str
    outbox: Outbox
    _after_response: list[Callable[[], Awaitable[None] | None]] = field(default_factory=list)

    async def notify(self, method: str, params: Any) -> None:
        await self.outbox.send_notification(method, params)

    async def send_line(self, line: bytes) -> None:
        await self.outbox.send_line(line)

    def after_response(self, fn: Callable[[], Awaitable[None] | None]) -> None:
        """Run ``fn`` once this request's answer is queued on the wire (so it goes out first)."""
        self._after_response.append(fn)

    async def run_after_response(self) -> None:
        """Called by the dispatcher once the answer is queued; a failing hook is logged, not raised."""
        for fn in self._after_response:
            try:
                result = fn()
                if result is not None:
                    await result
            except Exception:
                logger.exception("after-response hook failed")
