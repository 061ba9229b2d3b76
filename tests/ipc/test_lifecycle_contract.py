"""The pydantic-free lifecycle handlers accept and answer exactly what ``lifecycle_models`` declares."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from sidecar.core.settings import Settings
from sidecar.ipc.dispatcher import Dispatcher
from sidecar.ipc.lifecycle import Lifecycle, check_initialize_params
from sidecar.ipc.lifecycle_models import InitializeParams, InitializeResult, PingResult
from sidecar.ipc.router import Router
from sidecar.system.capabilities import detect_components


def _unwrap(result: Any) -> Any:
    """jsonrpcserver's ``Success(x)`` is ``Right(SuccessResult(x))``."""
    return result._value.result


def _lifecycle(tmp_path: Path) -> Lifecycle:
    settings = Settings(data_dir=tmp_path)
    dispatcher = Dispatcher(Router(), writer=None)  # type: ignore[arg-type] - no line is written here
    return Lifecycle(
        dispatcher,
        server_name="metona-sidecar",
        server_version="0.0.0",
        protocol_version="1.0",
        data_dir=str(tmp_path),
        max_line_bytes=1024,
        components=lambda: detect_components(settings),
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
