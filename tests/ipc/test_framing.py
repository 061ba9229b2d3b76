"""The line splitter: any way the bytes are chunked, the same lines come out (property-based)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.ipc.stdio import LineSplitter, OversizedLine

line_bytes = st.binary(max_size=300).map(lambda b: b.replace(b"\n", b""))


def _split(data: bytes, cuts: list[int], limit: int) -> list[object]:
    splitter = LineSplitter(limit)
    out: list[object] = []
    points = sorted({c % (len(data) + 1) for c in cuts})
    start = 0
    for p in [*points, len(data)]:
        out += splitter.feed(data[start:p])
        start = p
    return out + splitter.finish()


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(line_bytes, max_size=30), cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=40))
def test_chunking_never_changes_lines(lines: list[bytes], cuts: list[int]) -> None:
    data = b"".join(line + b"\n" for line in lines)
    assert _split(data, cuts, 1 << 20) == lines


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(line_bytes, max_size=30),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=40),
    limit=st.integers(min_value=1, max_value=200),
)
def test_oversized_lines_are_reported_and_the_rest_survive(lines: list[bytes], cuts: list[int], limit: int) -> None:
    data = b"".join(line + b"\n" for line in lines)
    expected = [OversizedLine(len(line)) if len(line) > limit else line for line in lines]
    assert _split(data, cuts, limit) == expected


def test_last_line_without_newline_counts_at_eof() -> None:
    splitter = LineSplitter(100)
    assert splitter.feed(b'{"a":1}\n{"b"') == [b'{"a":1}']
    assert splitter.finish() == [b'{"b"']
    assert splitter.finish() == []
