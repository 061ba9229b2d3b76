"""Every adapter target × every conformance case, through a real loopback HTTP server (phase-2 §8.3).

A pair is skipped, with its reason in the report, when the target lacks a capability of the case, when the
scenario is not expressible in the target's protocol, or when the target has no recording of the scenario.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .checks import check_run
from .loopback import LoopbackServer
from .suite import PAIRS, Pair, recording_skip_reason, run_pair

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def loopback() -> Iterator[LoopbackServer]:
    with LoopbackServer() as server:
        yield server


@pytest.fixture
def server(loopback: LoopbackServer) -> Iterator[LoopbackServer]:
    loopback.reset()
    yield loopback
    loopback.reset()


@pytest.mark.parametrize("pair", PAIRS, ids=[p.id for p in PAIRS])
async def test_conformance(pair: Pair, server: LoopbackServer, record_property: Callable[[str, Any], None]) -> None:
    if pair.skip_reason:
        pytest.skip(pair.skip_reason)
    missing = recording_skip_reason(pair)
    if missing:
        pytest.skip(missing)
    run = await run_pair(server, pair)
    problems = check_run(run)
    record_property("problems", problems)
    assert not problems, f"{pair.id} ({pair.model}, {run.recording.name}):\n  " + "\n  ".join(problems)
