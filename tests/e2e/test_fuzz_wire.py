"""Fuzz the real process's framing: whatever bytes arrive, every stdout line is JSON and it answers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.sidecar_proc import Sidecar

pytestmark = pytest.mark.e2e

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
messages = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2]),
        "id": st.one_of(st.integers(), st.text(max_size=8), st.none(), st.booleans()),
        "method": st.one_of(
            st.sampled_from(["ping", "dev/echo", "dev/sleep", "nope", "$/cancelRequest", "subtract"]),
            st.text(max_size=10),
        ),
        "params": json_values,
    },
)
garbage = st.binary(max_size=200).map(lambda b: b.replace(b"\n", b" "))
lines = st.one_of(
    messages.map(lambda m: json.dumps(m).encode()),
    st.lists(messages, max_size=4).map(lambda m: json.dumps(m).encode()),
    garbage,
    json_values.map(lambda v: json.dumps(v).encode()),
)


@pytest.fixture(scope="module")
def fuzz_sidecar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    data: Path = tmp_path_factory.mktemp("fuzz") / "data"
    data.mkdir()
    sc = Sidecar(data)
    sc.initialize()
    yield sc
    sc.close()  # asserts that no stdout line failed to parse as JSON


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(lines, min_size=1, max_size=5))
def test_any_bytes_keep_the_wire_clean(fuzz_sidecar: Sidecar, batch: list[bytes]) -> None:
    # never send `exit` (it would end the process under test)
    batch = [line for line in batch if b"exit" not in line]
    fuzz_sidecar.send_bytes(b"".join(line + b"\n" for line in batch))
    fuzz_sidecar.response(fuzz_sidecar.request("ping"), collect=[], timeout=30)
    assert fuzz_sidecar.proc.poll() is None
    assert not fuzz_sidecar.bad_lines
