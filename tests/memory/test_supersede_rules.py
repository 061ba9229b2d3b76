"""The lexical half of supersession (sidecar.memory.supersede), case by case, Chinese and English."""

from __future__ import annotations

import pytest

from sidecar.memory.supersede import Candidate, compare_statements, decide, has_correction_cue, strip_cues

FRAME_CASES = [
    # (old, new, verdict)
    ("我住在北京", "我住在上海", "changed_value"),
    ("我的生日是5月3日", "不对，我的生日是6月8日", "changed_value"),
    ("用户的名字叫张伟", "用户的名字叫李娜", "changed_value"),
    ("The meeting is on Monday", "The meeting is on Friday", "changed_value"),
    ("My favourite editor is Vim", "Actually, my favourite editor is now Emacs", "changed_value"),
    ("I work at Google", "I work at Microsoft", "changed_value"),
    ("我喜欢咖啡", "我不喜欢咖啡", "negation"),
    ("I like coffee", "I don't like coffee", "negation"),
    # not corrections
    ("我喜欢咖啡", "我喜欢茶", None),  # preferences are many-valued
    ("I like coffee", "I like tea", None),
    ("I like coffee", "I like coffee with milk", None),  # an elaboration
    ("我的猫叫小白", "我的狗叫大黄", None),  # another subject
    ("My name is Tom", "my dog's name is Rex", None),
    ("我是老师", "我是医生", None),  # a bare pronoun with a copula: people are many things
    ("I am a teacher", "I am a doctor", None),
    ("用户喜欢咖啡", "用户喜欢茶", None),  # 用 of 用户 is no verb
    ("我每天早上跑步", "我每天晚上游泳", None),
    ("我喜欢喝咖啡", "我喜欢喝咖啡。", None),  # a duplicate
]


@pytest.mark.parametrize(("old", "new", "verdict"), FRAME_CASES)
def test_compare_statements(old: str, new: str, verdict: str | None) -> None:
    assert compare_statements(old, new) == verdict


@pytest.mark.parametrize(
    ("text", "cue", "stripped"),
    [
        ("更正：我现在住在上海", True, "我住在上海"),
        ("不对，我的生日是6月8日", True, "我的生日是6月8日"),
        ("其实我已经搬到上海了", True, "我上海"),
        ("我不再喜欢咖啡了", True, "我喜欢咖啡"),
        ("Actually, my favourite editor is now Emacs", True, "my favourite editor is Emacs"),
        ("Correction: I live in Paris", True, "I live in Paris"),
        ("I no longer drink coffee", True, "I drink coffee"),
        ("我住在北京", False, "我住在北京"),
        ("I like tea", False, "I like tea"),
        ("The factual report", False, "The factual report"),  # no cue inside a word
    ],
)
def test_cues(text: str, cue: bool, stripped: str) -> None:
    assert has_correction_cue(text) is cue
    assert strip_cues(text) == stripped


def test_decide_correction_takes_the_best_candidate_and_its_ties_only() -> None:
    candidates = [
        Candidate("a", "I live in Berlin", 0.70),
        Candidate("b", "I live in Berlin.", 0.69),  # a duplicate of the wrong fact goes too
        Candidate("c", "Berlin has good museums", 0.55),
        Candidate("d", "I like jazz", 0.2),
    ]
    decisions = decide("I no longer live in Berlin, I moved to Paris", candidates)
    assert [(d.memory_id, d.reason) for d in decisions] == [("a", "correction"), ("b", "correction")]


def test_decide_without_cue_needs_a_frame() -> None:
    candidates = [Candidate("a", "我喜欢咖啡", 0.61), Candidate("b", "我住在北京", 0.05)]
    assert decide("我喜欢茶", candidates) == []


def test_decide_ignores_dissimilar_frames() -> None:
    # the frame matches but the embedding says they are about different things
    assert decide("我住在上海", [Candidate("a", "我住在北京", 0.3)]) == []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # a correction cue, and the most similar memory, but another subject AND another value: another fact
        ("My sister lives in Shanghai", "Actually my brother lives in Beijing"),  # USE cosine 0.57
        ("我的生日是5月3日", "其实我妻子的生日是6月8日"),
        ("My birthday is May 3", "Actually, my wife's birthday is June 8"),
    ],
)
def test_a_cue_does_not_supersede_a_statement_about_another_subject(old: str, new: str) -> None:
    others = [Candidate("z", "I like jazz", 0.53)]  # a vetoed best must not hand the correction to the next one
    assert decide(new, [Candidate("a", old, 0.57), *others]) == []


def test_a_cue_still_corrects_who_holds_a_role() -> None:
    decisions = decide("Actually, Bob is my manager", [Candidate("a", "Alice is my manager", 0.56)])
    assert [(d.memory_id, d.reason) for d in decisions] == [("a", "correction")]
