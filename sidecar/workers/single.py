"""A domain's side of a worker child that serves one request at a time and is killed when a request is given up
(cancelled, timed out): the maths worker and the export worker. The next request starts a new child."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from .channel import WorkerChannel


class SingleChild:
    def __init__(self, channel: WorkerChannel) -> None:
        self._channel = channel
        self._lock = anyio.Lock()
        """Held for a request: one at a time in the child, so a kill stops only the request given up."""

    @property
    def pid(self) -> int | None:
        return self._channel.pid

    @property
    def started(self) -> int:
        """Children started so far."""
        return self._channel.starts

    async def _kill(self) -> None:
        """Kill the child's process group now; the next request starts a new child."""
        with anyio.CancelScope(shield=True):
            await self._channel.stop()

    async def aclose(self) -> None:
        await self._channel.aclose()
