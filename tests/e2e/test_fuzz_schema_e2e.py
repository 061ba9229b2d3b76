"""Issue 21: the schema-driven fuzz (scripts/fuzz_stdio.py), a short run: every catalog method with generated and
broken params, cut and garbage lines, batches, duplicate ids — no crash, stdout always JSON, every request answered
once, no INTERNAL_ERROR, alive at the end, SQLite intact. The long run (100,000 lines) is the same script."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.support.sidecar_proc import sidecar_cmd

pytestmark = pytest.mark.e2e
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fuzz_stdio.py"


@pytest.mark.parametrize("seed", [1, 2])
def test_a_short_schema_fuzz_run_is_clean(seed: int, tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("fuzz_stdio", SCRIPT)
    assert spec is not None and spec.loader is not None
    fuzz = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fuzz)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(100_000)  # the deep-nesting lines are serialised here
    try:
        figures = fuzz.fuzz(400, seed, sidecar_cmd(), tmp_path)
    finally:
        sys.setrecursionlimit(limit)
    assert figures["methods"] >= 80 and figures["requests"] > 300
    assert figures["clean"], {k: v for k, v in figures.items() if k != "skipped_methods"}


def test_what_the_long_run_found_is_typed(tmp_path: Path) -> None:
    """A lone surrogate in params (providers/get: UnicodeEncodeError in SQLite) and a 4,096-character theme path
    (ENAMETOOLONG) were INTERNAL_ERROR."""
    from tests.support.sidecar_proc import Sidecar

    data = tmp_path / "data"
    data.mkdir()
    sc = Sidecar(data, dev=False)
    try:
        sc.initialize()
        sc.send_bytes(b'{"jsonrpc":"2.0","id":1,"method":"providers/get","params":{"provider_id":"\\udfff"}}\n')
        reply = sc.response(1)
        assert reply["error"]["code"] == -32602, reply
        assert reply["error"]["data"]["details"]["errors"][0]["loc"] == ["provider_id"]
        reply = sc.call("themes/inspect", {"path": "A" * 4096})
        assert reply["error"]["data"]["code"] == "THEME_PACKAGE_NOT_FOUND", reply
    finally:
        sc.close()
