"""Issue 21, bounds: every events method takes one bounded cursor (after_sequence ≤ an SQLite INTEGER)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from sidecar.core.common import MAX_SEQUENCE
from sidecar.media.models import TranscriptionEventsParams
from sidecar.trace.models import SubscribeParams

SCHEMA = Path(__file__).resolve().parents[2] / "ipc_schema" / "metona-sidecar.schema.json"


def _params_schema(doc: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    node = entry["properties"]["params"]
    while "$ref" in node:
        node = doc["$defs"][node["$ref"].rsplit("/", 1)[1]]
    return node


def test_every_events_method_bounds_after_sequence() -> None:
    doc = json.loads(SCHEMA.read_text("utf-8"))
    methods = doc["properties"]["methods"]["properties"]
    with_cursor = {
        name: _params_schema(doc, entry)["properties"]["after_sequence"]
        for name, entry in methods.items()
        if "after_sequence" in _params_schema(doc, entry).get("properties", {})
    }
    assert {"events/subscribe", "media/transcriptions/events", "plugins/events"} <= set(with_cursor)
    for name, cursor in with_cursor.items():
        assert cursor.get("minimum") == 0 and cursor.get("maximum") == MAX_SEQUENCE, (name, cursor)


@pytest.mark.parametrize("model", [SubscribeParams, TranscriptionEventsParams])
def test_a_huge_cursor_is_invalid_params(model: Any) -> None:
    base = {"resource_id": "r"} if model is SubscribeParams else {"job_id": "j"}
    with pytest.raises(ValidationError):
        model.model_validate({**base, "after_sequence": 10**30})
    assert model.model_validate({**base, "after_sequence": MAX_SEQUENCE}).after_sequence == MAX_SEQUENCE


def test_a_lone_surrogate_in_params_is_invalid_params_not_an_internal_error() -> None:
    """Found by the schema fuzz (issue 21): "\\udfff" in a provider id reached SQLite → INTERNAL_ERROR."""
    from sidecar.ipc.dispatcher import _lone_surrogate

    assert _lone_surrogate({"provider_id": "\udfff"}) == ["provider_id"]
    assert _lone_surrogate({"a": [{"b": "x\ud800y"}]}) == ["a", 0, "b"]
    assert _lone_surrogate({"k\udc00": 1}) == ["k\udc00"]
    assert _lone_surrogate({"t": "\U0001f642 ok", "n": [1, None, {"x": "中文"}]}) is None
