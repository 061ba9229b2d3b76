"""A plain request for a typed method is answered without jsonrpcserver (issue 22: its request schema check walked
every value of the params), with the answer jsonrpcserver gives for it."""

from __future__ import annotations

import os
from typing import Any

import pytest

from sidecar.core.common import EmptyParams
from sidecar.ipc import dispatcher as dispatcher_module
from sidecar.ipc.context import RequestContext
from sidecar.ipc.dispatcher import Dispatcher
from sidecar.ipc.router import Method, Router
from sidecar.ipc.stdio import LineWriter

pytestmark = pytest.mark.anyio


async def _hello(ctx: RequestContext, p: EmptyParams) -> dict[str, Any]:
    return {"hello": "world"}


REQUESTS = [
    {"jsonrpc": "2.0", "id": 7, "method": "t/hello"},
    {"jsonrpc": "2.0", "id": "s", "method": "t/hello", "params": {}},
    {"jsonrpc": "2.0", "id": 8, "method": "t/hello", "params": [1]},  # positional: invalid params
    {"jsonrpc": "2.0", "id": 9, "method": "t/hello", "params": {"unknown": 1}},
    {"jsonrpc": "2.0", "method": "t/hello"},  # a notification: no answer
]


async def _answers(monkeypatch: pytest.MonkeyPatch, *, direct: bool) -> list[Any]:
    r, w = os.pipe()
    os.close(r)
    dispatcher = Dispatcher(Router(), LineWriter(w))
    dispatcher.add_methods([Method("t/hello", EmptyParams, dict[str, Any], _hello)])
    dispatcher.mark_initialized()
    if not direct:
        dispatcher._direct.clear()  # what every typed method went through before
    else:

        async def refuse(*args: Any, **kwargs: Any) -> None:
            raise AssertionError("went through jsonrpcserver")

        monkeypatch.setattr(dispatcher_module, "dispatch_one", refuse)
    answers = [(await dispatcher.handle_message(dict(m)))[0] for m in REQUESTS]
    os.close(w)
    return answers


async def test_a_plain_request_for_a_typed_method_skips_jsonrpcserver_with_the_same_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    through = await _answers(monkeypatch, direct=False)
    direct = await _answers(monkeypatch, direct=True)
    assert direct == through
    assert direct[0] == {"jsonrpc": "2.0", "result": {"hello": "world"}, "id": 7}
    assert direct[2]["error"]["data"]["code"] == "VALIDATION_ERROR"
    assert direct[4] is None
