"""The pydantic-free lifecycle handlers accept and answer exactly what ``lifecycle_models`` declares, and
answered directly (without jsonrpcserver) exactly what jsonrpcserver answers; the start path imports neither."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from sidecar.core.settings import Settings
from sidecar.ipc.dispatcher import Dispatcher
from sidecar.ipc.early import ServerInfo
from sidecar.ipc.lifecycle import Lifecycle, check_initialize_params
from sidecar.ipc.lifecycle_models import InitializeParams, InitializeResult, PingResult
from sidecar.ipc.router import Router
from sidecar.system.capabilities import detect_components

ROOT = Path(__file__).resolve().parents[2]


def _unwrap(result: Any) -> Any:
    """A lifecycle method answers a :class:`~sidecar.ipc.jsonrpc.Reply`."""
    assert result.error is None, result.error
    return result.result


def _lifecycle(tmp_path: Path) -> Lifecycle:
    settings = Settings(data_dir=tmp_path)
    dispatcher = Dispatcher(Router(), writer=None)  # type: ignore[arg-type] - no line is written here
    return Lifecycle(
        dispatcher,
        ServerInfo("metona-sidecar", "0.0.0", "1.0", str(tmp_path), 1024, lambda: detect_components(settings)),
    )


@pytest.mark.anyio
async def test_initialize_result_validates_against_the_model(tmp_path: Path) -> None:
    life = _lifecycle(tmp_path)
    result = await life.initialize(None, client_info={"name": "x"})
    InitializeResult.model_validate(_unwrap(result))


@pytest.mark.anyio
async def test_ping_result_validates(tmp_path: Path) -> None:
    life = _lifecycle(tmp_path)
    result = await life.ping(None)
    PingResult.model_validate(_unwrap(result))


SAMPLES: list[dict[str, Any]] = [
    {},
    {"process_id": 42},
    {"process_id": None, "client_info": None, "protocol_version": None, "capabilities": {}},
    {"process_id": "42"},
    {"process_id": True},
    {"process_id": 4.5},
    {"client_info": {"name": "electron", "version": "1.0"}},
    {"client_info": {"version": "1.0"}},
    {"client_info": {"name": 3}},
    {"client_info": "electron"},
    {"client_info": {"name": "e", "version": 2}},
    {"protocol_version": 1},
    {"capabilities": []},
    {"capabilities": {"x": 1}, "unknown_key": {"ignored": True}},
]


@pytest.mark.parametrize("params", SAMPLES)
def test_hand_validation_agrees_with_the_model(params: dict[str, Any]) -> None:
    try:
        InitializeParams.model_validate(params)
        model_locs: set[tuple[Any, ...]] = set()
    except ValidationError as exc:
        model_locs = {tuple(e["loc"]) for e in exc.errors()}
    hand_locs = {tuple(e["loc"]) for e in check_initialize_params((), params)}
    assert hand_locs == model_locs


MESSAGES: list[dict[str, Any]] = [
    {"jsonrpc": "2.0", "id": 1, "method": "ping"},
    {"jsonrpc": "2.0", "id": "a", "method": "ping", "params": {}},
    {"jsonrpc": "2.0", "id": None, "method": "ping", "params": []},
    {"jsonrpc": "2.0", "id": 2.5, "method": "ping", "params": [1]},
    {"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"x": 1}},
    {"jsonrpc": "2.0", "method": "ping"},
    {"jsonrpc": "2.0", "id": 4, "method": "ping", "params": 3},
    {"jsonrpc": "2.0", "id": 5, "method": "ping", "extra": 1},
    {"jsonrpc": "1.0", "id": 6, "method": "ping"},
    {"id": 7, "method": "ping"},
    {"jsonrpc": "2.0", "id": 8, "method": "initialize", "params": {"process_id": "x"}},
    {"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": ["x"]},
    {"jsonrpc": "2.0", "id": 10, "method": "initialize", "params": {"client_info": {"name": "t"}}},
    {"jsonrpc": "2.0", "id": 11, "method": "initialize", "params": {}},
    {"jsonrpc": "2.0", "id": 12, "method": "shutdown", "params": {"now": True}},
    {"jsonrpc": "2.0", "id": 13, "method": "shutdown"},
    {"jsonrpc": "2.0", "id": 14, "method": "shutdown"},
]


@pytest.mark.anyio
async def test_direct_answers_equal_jsonrpcservers(tmp_path: Path) -> None:
    answers: dict[bool, list[Any]] = {}
    for direct in (False, True):
        life = _lifecycle(tmp_path)
        dispatcher = life.dispatcher
        dispatcher.add_raw_methods(life.raw_methods(), direct=direct)
        answers[direct] = []
        for message in MESSAGES:
            response, _ctx = await dispatcher.handle_message(copy.deepcopy(message))
            if response is not None and "result" in response and isinstance(response["result"], dict):
                response["result"].pop("components", None)  # detected twice: the same, but not the point
            answers[direct].append(response)
    assert answers[True] == answers[False]
    assert answers[True][0] == {"jsonrpc": "2.0", "result": {}, "id": 1}
    assert answers[True][5] is None  # a notification
    assert answers[True][-1] == {"jsonrpc": "2.0", "result": None, "id": 14}


def test_the_start_path_imports_neither_jsonrpcserver_nor_pydantic() -> None:
    code = (
        "import sys, sidecar.__main__, sidecar.app, sidecar.core.settings\n"
        "heavy = [m for m in ('jsonrpcserver', 'jsonschema', 'pydantic', 'pydantic_core') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
