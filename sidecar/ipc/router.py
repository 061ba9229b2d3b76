"""The method table: ``Method(name, params, result, handler)`` records, registered explicitly.

A domain's ``rpc.py`` returns a list of :class:`Method`; ``app.py`` adds them all to one
:class:`Router`. The schema generator (``scripts/gen_ipc_schema.py``) walks the same table.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from pydantic import BaseModel, TypeAdapter

    from .context import RequestContext

P = TypeVar("P", bound="BaseModel")
R = TypeVar("R")


@dataclass(frozen=True)
class Method(Generic[P, R]):
    """One JSON-RPC method: validated params in, a typed result out.

    ``result`` is any type pydantic can dump (a model, ``list[Model]``, ``None``); the handler's
    return value is dumped with ``by_alias=True`` so IR objects come out camelCase.
    """

    name: str
    params: type[P]
    result: Any
    handler: Callable[[RequestContext, P], Awaitable[R]]
    summary: str = ""
    dev: bool = False  # only registered with --dev-methods; never in ipc_schema/
    _adapter: list[TypeAdapter[Any]] = field(default_factory=list, init=False, repr=False, compare=False)

    def dump_result(self, value: Any) -> Any:
        # IR models drop their own absent optional fields (see sidecar.ir.base); phase-2 models keep
        # the nulls the seed shows, so no global exclude_none here. The adapter is built on first
        # use: building ~100 of them at start-up would cost a noticeable part of `initialize`.
        if not self._adapter:
            from pydantic import TypeAdapter

            self._adapter.append(TypeAdapter(self.result))
        return self._adapter[0].dump_python(value, mode="json", by_alias=True)


@dataclass(frozen=True, slots=True)
class Notification:
    """A notification the sidecar sends (for the schema): ``method`` and its params type."""

    method: str
    params: Any
    summary: str = ""


class Router:
    def __init__(self) -> None:
        self._methods: dict[str, Method[Any, Any]] = {}
        self._notifications: dict[str, Notification] = {}

    def add(self, *methods: Method[Any, Any]) -> None:
        for m in methods:
            if m.name in self._methods:
                raise ValueError(f"method {m.name!r} registered twice")
            self._methods[m.name] = m

    def add_notifications(self, *notes: Notification) -> None:
        for n in notes:
            if n.method in self._notifications:
                raise ValueError(f"notification {n.method!r} registered twice")
            self._notifications[n.method] = n

    def __iter__(self) -> Iterator[Method[Any, Any]]:
        return iter(sorted(self._methods.values(), key=lambda m: m.name))

    @property
    def notifications(self) -> Iterable[Notification]:
        return sorted(self._notifications.values(), key=lambda n: n.method)
