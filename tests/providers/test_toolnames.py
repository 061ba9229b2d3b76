"""Registry tool names ↔ vendor wire names: valid for every vendor, reversible, collision-free."""

from __future__ import annotations

import re

from sidecar.providers.toolnames import wire_names

VALID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def test_valid_names_keep_themselves_and_dotted_names_are_mapped() -> None:
    names = wire_names(["read_file", "fixture.add", "time.get_current_time"])
    assert names == {"read_file": "read_file", "fixture.add": "fixture__add",
                     "time.get_current_time": "time__get_current_time"}  # fmt: skip


def test_no_collisions_and_every_name_valid() -> None:
    tricky = ["fixture__add", "fixture.add", "a.b", "a__b", "x" * 64 + ".y", "x" * 64 + ".z", "p.t-1", "p_t-1"]
    names = wire_names(tricky)
    assert len(set(names.values())) == len(tricky)
    assert all(VALID.match(v) for v in names.values())
    assert names["fixture__add"] == "fixture__add" and names["a__b"] == "a__b"
    assert wire_names(reversed(tricky)) == names, "the same map whatever the order"
