"""ipc_schema/ is generated from the code: regenerate it and fail on any drift (and on a tsc error)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ipc_schema_matches_the_code() -> None:
    proc = subprocess.run(
        [sys.executable, "scripts/gen_ipc_schema.py", "--check"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]


def test_schema_covers_the_method_table() -> None:
    from sidecar.app import schema_router

    doc = json.loads((ROOT / "ipc_schema" / "metona-sidecar.schema.json").read_text())
    router = schema_router()
    names = {m.name for m in router if not m.dev}
    assert set(doc["properties"]["methods"]["properties"]) == names
    assert {"initialize", "shutdown", "ping", "events/subscribe", "events/unsubscribe"} <= names
    assert not any(n.startswith("dev/") for n in doc["properties"]["methods"]["properties"])
    assert set(doc["properties"]["notifications"]["properties"]) == {n.method for n in router.notifications}
    assert set(doc["properties"]["clientNotifications"]["properties"]) == {"exit", "$/cancelRequest"}
    line = doc["$defs"]["MetonaStreamEvent"]
    assert list(line["properties"])[:6] == ["type", "requestId", "sessionId", "iteration", "seq", "timestamp"]


def test_ir_defs_are_camel_case_and_complete() -> None:
    from sidecar.ir import IR_MODELS

    ir = json.loads((ROOT / "ipc_schema" / "defs" / "ir.json").read_text())["$defs"]
    assert {m.__name__ for m in IR_MODELS} <= set(ir)
    for name, definition in ir.items():
        for key in definition.get("properties", {}):
            assert "_" not in key, f"{name}.{key} is not camelCase"
