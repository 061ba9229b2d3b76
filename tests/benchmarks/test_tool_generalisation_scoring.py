"""The scoring of scripts/bench/bench_tool_generalisation.py (BFCL's rules for the possible answers)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location(
        "bench_tool_generalisation", ROOT / "scripts/bench/bench_tool_generalisation.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_value_is_right_when_it_is_one_of_the_possible_answers() -> None:
    same = _bench().same
    assert same("New York", "new york") and not same("New York", "New York, NY")
    assert same({"unit": "c", "days": 3}, {"unit": ["c", "celsius"], "days": [3]})
    assert not same({"unit": "f", "days": 3}, {"unit": ["c", "celsius"], "days": [3]})
    assert same({"days": 3}, {"unit": ["", "c"], "days": [3]})  # an optional key left out
    assert not same({"days": 3, "extra": 1}, {"days": [3]})


def test_a_nested_value_written_as_itself_is_right_too() -> None:
    """tool-generalisation-v1 writes a nested object's values as themselves (``contents: ["…"]``), BFCL as a list
    of possible answers (``contents: [["…"]]``): both are read."""
    same = _bench().same
    truth = {"entityName": "陈静", "contents": ["下个月搬去杭州"]}
    assert same({"entityName": "陈静", "contents": ["下个月搬去杭州"]}, truth)
    assert same(
        {"entityName": "陈静", "contents": ["下个月搬去杭州"]},
        {"entityName": ["陈静"], "contents": [["下个月搬去杭州"]]},
    )
    assert not same({"entityName": "陈静", "contents": ["搬去上海"]}, truth)
