"""The local model worker's loop guard (pure: no model): a generation whose output ends with the same piece of
arithmetic eight times in a row is stopped; content that repeats a short unit is stopped only far later."""

from __future__ import annotations

from sidecar.localmodel.worker import (
    CONTENT_REPEATS,
    DIGIT_REPEATS,
    EXPRESSION_REPEATS,
    LONG_REPEATS,
    LOOP_TAIL,
    LoopGuard,
)


def feed(pieces: list[str], *, arguments: bool = False) -> int | None:
    """The index of the piece at which the guard fires, None if it never does (``arguments``: a call's arguments)."""
    guard = LoopGuard(arguments=arguments)
    return next((i for i, piece in enumerate(pieces) if guard.feed(piece)), None)


def test_a_repeated_piece_of_arithmetic_stops_the_generation_at_its_eighth_repeat() -> None:
    pieces = ['{"expression": "17.5 * 60', *[" / 60"] * 20]
    assert EXPRESSION_REPEATS == 8
    assert feed(pieces) == 8  # the piece that makes " / 60" eight times in a row
    assert feed(["2", *[" + 1"] * 8]) == 8 and feed(["2", *[" + 1"] * 7]) is None


def test_legitimate_content_that_repeats_a_short_unit_is_not_a_loop() -> None:
    assert feed(['{"path": "notes.md", "content": "', "- buy milk\n- eggs\n", "| a | b |\n| --- | --- |\n"]) is None
    assert feed(["60 * 60 * 24 * 7", " = one week in seconds"]) is None
    assert feed(["-" * 40]) is None  # a rule
    table = "| " + " | ".join(f"c{i}" for i in range(30)) + " |\n" + "|---" * 30 + "|\n"
    assert feed(['{"path": "t.md", "content": "', table, "| x " * 30, '|"}']) is None
    assert feed(["id,a,b,c\n", "0," * 100, "0\n", "0,0,0,0\n" * 40]) is None  # CSV zeros
    assert feed(["# To do\n", "- [ ] \n" * 50]) is None  # an empty checklist
    assert feed(["-1,-1,-1,-1,-1,-1,-1,-1,-1,-1"]) is None  # a minus sign is no operator


def test_content_repeating_far_more_than_any_document_would_is_a_loop() -> None:
    assert feed(["|---" * (CONTENT_REPEATS - 1)]) is None and feed(["|---" * CONTENT_REPEATS]) == 0
    assert feed(['{"top_k": 1', "0" * (CONTENT_REPEATS - 1)]) is None
    assert feed(['{"top_k": 1', *["0"] * CONTENT_REPEATS]) == CONTENT_REPEATS  # a runaway number, a token at a time


def test_the_guard_looks_at_the_latest_output_only() -> None:
    guard = LoopGuard()
    filler = "".join(chr(0x4E00 + i) for i in range(LOOP_TAIL))  # no unit repeats in it
    assert not guard.feed(" / 60" * 7 + filler[:-3])
    assert len(guard.tail) == LOOP_TAIL
    assert not guard.feed(" / 60")  # the early repeats are out of the window: one repeat in view


def test_a_list_that_starts_over_is_a_loop_and_long_repeated_lines_of_a_document_are_not() -> None:
    phrase = "urban design, park design, residential design, commercial design, "
    start = '{"location": "Portland", "specialization": "small space garden design, '
    assert feed([start, *[phrase] * (LONG_REPEATS - 1)]) is None
    assert feed([start, *[phrase] * LONG_REPEATS]) == LONG_REPEATS
    assert feed([start, *list(phrase * LONG_REPEATS)]) is not None  # a character at a time
    rows = "".join(f"| {i} | TBD | TBD |\n" for i in range(40))  # numbered rows: no long unit repeats
    assert feed(["| n | a | b |\n|---|---|---|\n", rows]) is None
    assert feed(["0,0,0,0,0,0,0,0,0,0\n" * 12, "| | | |\n" * 12]) is None  # a dozen rows of zeros, empty rows


def test_a_run_of_digits_that_starts_over_is_a_loop_long_before_other_content() -> None:
    """A made-up promo code, ``"1234567890" * 128``, ran ~1,300 digit tokens (867 s) before the content bar."""
    start = '{"location": "Rua Explosao, 8899", "promo_code": "'
    assert feed([start, *["1234567890"] * (DIGIT_REPEATS - 1)], arguments=True) is None
    fired = feed([start, *list("1234567890" * DIGIT_REPEATS)], arguments=True)
    assert fired == len("1234567890") * DIGIT_REPEATS  # a digit a token
    assert feed([start, *list("1234567890" * DIGIT_REPEATS)]) is None  # a file's content: the content bar
    assert feed([start, "4242 4242 4242 4242", '"}'], arguments=True) is None  # a test card number
    assert (
        feed(['{"n": "', "42" * 8, '"}']) is None
        and feed(["3.14159265358979323846264338327950288419716939937510"]) is None
    )
    assert feed(['{"top_k": 1', "0" * (CONTENT_REPEATS - 1)]) is None  # one digit: the content bar, as before


def test_digits_a_user_asks_for_are_no_loop() -> None:
    """A review's inputs (2026-12-06): patterned digits a user may ask for, under the digit bar."""
    one_seventh = "0." + "142857" * 25  # 1/7 to 150 places
    assert feed(['{"value": "', one_seventh, '"}'], arguments=True) is None
    assert feed(['{"mask": "', "10" * 32, '"}'], arguments=True) is None  # a 64-bit alternating mask
    assert feed(['{"seed": "', "0123456789" * 30, '"}'], arguments=True) is None
    assert feed(["0." + "142857" * 50, "0123456789" * 100, "0110" * 100]) is None  # a file's content: any
