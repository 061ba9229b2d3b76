"""The local model worker's loop guard (pure: no model): a generation whose output ends with the same few
characters eight times in a row is stopped."""

from __future__ import annotations

from sidecar.localmodel.worker import LOOP_TAIL, LoopGuard


def feed(pieces: list[str]) -> int | None:
    """The index of the piece at which the guard fires, None if it never does."""
    guard = LoopGuard()
    return next((i for i, piece in enumerate(pieces) if guard.feed(piece)), None)


def test_a_repeated_unit_stops_the_generation_at_its_eighth_repeat() -> None:
    pieces = ['{"expression": "17.5 * 60', *[" / 60"] * 20]
    assert feed(pieces) == 8  # the piece that makes " / 60" eight times in a row


def test_legitimate_output_is_not_a_loop() -> None:
    assert feed(['{"path": "notes.md", "content": "', "- buy milk\n- eggs\n", "| a | b |\n| --- | --- |\n"]) is None
    assert feed(["60 * 60 * 24 * 7", " = one week in seconds"]) is None
    assert feed(["-" * 40]) is None  # one character repeated (a rule) is not a loop of a unit
    assert feed(["ab" * 7]) is None and feed(["ab" * 8]) == 0


def test_the_guard_looks_at_the_latest_output_only() -> None:
    guard = LoopGuard()
    assert not guard.feed("x" + " / 60" * 5)
    assert not guard.feed("y" * LOOP_TAIL)  # the early repeats are out of the window (one character: no loop)
    assert len(guard.tail) == LOOP_TAIL
