"""Does a new memory correct an older one? Pure text rules, used together with embedding similarity.

No language model is involved (the sidecar must decide offline, in milliseconds), so the rules are deliberately
narrow. A new memory supersedes an active memory of the same ``type`` and ``sessionId`` when one of these holds:

``correction``
    The new text carries a correction cue (Chinese 不对/更正/纠正/说错/记错/改成/改为/换成/不再/其实/实际上/搬到...,
    English "actually", "correction", "no longer", "not anymore", "instead", "changed to", "moved to", "I was
    wrong"...) and the old memory is the most similar candidate, with cosine similarity at least
    :data:`CORRECTION_MIN_SIMILARITY` (the larger of the similarities of the full text and of the text with the cue
    words removed). Near-ties (within :data:`CORRECTION_TIE_MARGIN` of the best) go too: duplicates of a wrong
    fact must not survive its correction.

``changed_value``
    Without any cue: both texts are the same statement frame with a different value — they share a prefix that
    contains an assignment word (是/为/叫/姓/住/位于/设为/用/使用, is/are/was/live/work/use/prefer/named/...)
    preceded by a non-empty, identical subject, both differ after it, and at least half of the tokens are shared
    ("我的生日是5月3日" → "我的生日是6月8日", "The meeting is on Monday" → "The meeting is on Friday"). A bare
    pronoun with a copula ("I am a teacher" / "我是老师") is not a subject: people are many things at once.
    A preference ("I like coffee" → "I like tea") is not single-valued and is never superseded by this rule.

``negation``
    The texts differ only by negation words (不/没/没有/别/not/don't/never/...): "I like coffee" → "I don't like
    coffee".

The embedding similarity floor (:data:`FRAME_MIN_SIMILARITY`) guards the lexical rules against coincidental
token overlap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Literal

SupersedeReason = Literal["explicit", "correction", "changed_value", "negation"]

CORRECTION_MIN_SIMILARITY = 0.5
CORRECTION_TIE_MARGIN = 0.03
FRAME_MIN_SIMILARITY = 0.6
FRAME_MIN_SHARED = 0.5

_ZH_CUES = (
    "不对",
    "更正",
    "纠正",
    "订正",
    "说错",
    "搞错",
    "记错",
    "弄错",
    "写错",
    "改成",
    "改为",
    "改到",
    "换成",
    "变成",
    "不再",
    "已经不",
    "其实",
    "实际上",
    "事实上",
    "搬到",
    "搬去",
)
_EN_CUES = (
    "actually",
    "correction",
    "to correct",
    "i was wrong",
    "that's wrong",
    "that was wrong",
    "not anymore",
    "no longer",
    "anymore",
    "any more",
    "instead",
    "changed to",
    "change to",
    "switched to",
    "moved to",
    "in fact",
)
# Words that only date a statement; removed before comparing frames ("my editor is now Emacs").
_ZH_FILLERS = ("现在", "目前", "如今", "已经", "了", "啦", "呢", "吧", "啊", "呀", "哦")
_EN_FILLERS = ("now", "currently", "today", "these days")

_CUE_RE = re.compile(
    "|".join(
        [re.escape(c) for c in _ZH_CUES]
        + [r"\b" + re.escape(c).replace(r"\ ", r"\s+") + r"\b" for c in sorted(_EN_CUES, key=len, reverse=True)]
    ),
    re.IGNORECASE,
)
_FILLER_RE = re.compile(
    "|".join(
        [re.escape(c) for c in _ZH_FILLERS] + [r"\b" + re.escape(c).replace(r"\ ", r"\s+") + r"\b" for c in _EN_FILLERS]
    ),
    re.IGNORECASE,
)
_TOKEN_RE = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")

_NEGATIONS = frozenset(
    {"不", "没", "没有", "别", "非", "未", "not", "no", "never", "don't", "doesn't", "didn't", "isn't", "aren't"}
    | {"wasn't", "weren't", "won't", "can't", "cannot", "dont", "doesnt", "didnt", "isnt", "arent"}
)
_COPULAS: frozenset[tuple[str, ...]] = frozenset({("是",), ("为",), ("is",), ("are",), ("am",), ("was",), ("were",)})
_PREDICATES: frozenset[tuple[str, ...]] = frozenset(
    {("叫",), ("姓",), ("住",), ("位", "于"), ("定", "在"), ("设", "为"), ("等", "于"), ("用",), ("使", "用")}
    | {("live",), ("lives",), ("lived",), ("living",), ("work",), ("works",), ("working",), ("use",), ("uses",)}
    | {("using",), ("prefer",), ("prefers",), ("called",), ("named",), ("equals",), ("located",), ("based",)}
)
_BARE_SUBJECTS = frozenset({"我", "你", "他", "她", "它", "i", "you", "he", "she", "it", "we", "they", "user"})
_BARE_SUBJECTS_MULTI = frozenset({("我", "们"), ("用", "户"), ("the", "user"), ("他", "们"), ("你", "们")})


def _gap(match: re.Match[str]) -> str:
    """What a removed cue leaves: nothing inside Chinese text, a space between Latin words."""
    return " " if match.group().isascii() else ""


def has_correction_cue(text: str) -> bool:
    return _CUE_RE.search(text) is not None


def strip_cues(text: str) -> str:
    """The statement without its correction cues and dating words (what is compared and embedded)."""
    stripped = _FILLER_RE.sub(_gap, _CUE_RE.sub(_gap, text))
    stripped = re.sub(r"^[\s,，:：;；.。!！、-]+", "", stripped)
    return re.sub(r"\s+", " ", stripped).strip()


def tokens(text: str) -> list[str]:
    """Lowercased words for Latin scripts and digits, single characters for CJK; punctuation dropped."""
    return _TOKEN_RE.findall(text.lower())


def _find(seq: list[str], pattern: tuple[str, ...], start: int) -> int:
    n = len(pattern)
    for i in range(start, len(seq) - n + 1):
        if tuple(seq[i : i + n]) == pattern:
            return i
    return -1


def _bare(subject: list[str]) -> bool:
    return (len(subject) == 1 and subject[0] in _BARE_SUBJECTS) or tuple(subject) in _BARE_SUBJECTS_MULTI


def _has_subject_and_assignment(prefix: list[str]) -> bool:
    for cues, copula in ((_PREDICATES, False), (_COPULAS, True)):
        for cue in cues:
            at = _find(prefix, cue, 1)  # index 0 has no subject before it (and 用 of 用户 is no verb)
            while at != -1:
                subject = prefix[:at]
                if not (copula and _bare(subject)):
                    return True
                at = _find(prefix, cue, at + 1)
    return False


def compare_statements(old: str, new: str) -> Literal["changed_value", "negation"] | None:
    """The lexical half of the rules: does ``new`` restate ``old``'s frame with another value, or negate it?"""
    a, b = tokens(strip_cues(old)), tokens(strip_cues(new))
    if not a or not b:
        return None
    ops = [op for op in SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if op[0] != "equal"]
    if not ops:
        return None  # the same statement: a duplicate, not a correction
    removed = [t for _, i1, i2, _, _ in ops for t in a[i1:i2]]
    added = [t for _, _, _, j1, j2 in ops for t in b[j1:j2]]
    if set(removed) | set(added) <= _NEGATIONS:
        return "negation"
    if not removed or not added:
        return None  # an elaboration ("I like coffee with milk"), not a changed value
    shared = len(a) - len(removed)
    if shared / max(len(a), len(b)) < FRAME_MIN_SHARED:
        return None
    first_change = ops[0][1]
    if _has_subject_and_assignment(a[:first_change]):
        return "changed_value"
    return None


def another_fact(old: str, new: str) -> bool:
    """Both texts share an assignment word, but differ before it (the subject) AND after it (the value):
    "My sister lives in Shanghai" / "My brother lives in Beijing" state two facts, neither corrects the other.
    (Only the subject differing — "Alice is my manager" / "Bob is my manager" — may still be a correction.)"""
    a, b = tokens(strip_cues(old)), tokens(strip_cues(new))
    ops = SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    changes = [(i1, i2) for tag, i1, i2, _, _ in ops if tag != "equal"]
    for tag, i1, i2, _, _ in ops:
        if tag != "equal":
            continue
        for cue in _PREDICATES | _COPULAS:
            at = _find(a[i1:i2], cue, 0)
            while at != -1:
                start, end = i1 + at, i1 + at + len(cue)
                if any(c_end <= start for _, c_end in changes) and any(c_start >= end for c_start, _ in changes):
                    return True
                at = _find(a[i1:i2], cue, at + 1)
    return False


@dataclass(frozen=True, slots=True)
class Candidate:
    memory_id: str
    content: str
    similarity: float
    """max(cos(new, old), cos(new without cues, old))"""


@dataclass(frozen=True, slots=True)
class Decision:
    memory_id: str
    reason: SupersedeReason
    similarity: float


def decide(new_content: str, candidates: list[Candidate]) -> list[Decision]:
    """Which of ``candidates`` (active, same type and session, most similar first) ``new_content`` supersedes."""
    decisions: dict[str, Decision] = {}
    for c in candidates:
        if c.similarity < FRAME_MIN_SIMILARITY:
            continue
        verdict = compare_statements(c.content, new_content)
        if verdict is not None:
            decisions[c.memory_id] = Decision(c.memory_id, verdict, c.similarity)
    if has_correction_cue(new_content):
        eligible = [c for c in candidates if c.similarity >= CORRECTION_MIN_SIMILARITY]
        if eligible:
            best = max(c.similarity for c in eligible)
            for c in eligible:  # the best and its near-ties, unless they state another fact
                if c.similarity < best - CORRECTION_TIE_MARGIN or c.memory_id in decisions:
                    continue
                if not another_fact(c.content, new_content):
                    decisions[c.memory_id] = Decision(c.memory_id, "correction", c.similarity)
    return sorted(decisions.values(), key=lambda d: -d.similarity)
