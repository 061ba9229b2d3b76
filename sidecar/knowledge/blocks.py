"""Markdown → blocks, and stable block ids across edits.

Splitting is line based and deliberately simple: a heading line is a block; a fenced code block is one
block; otherwise blank lines separate blocks, and a block's kind comes from its first line (list, quote,
table, paragraph). Joining the blocks with blank lines gives the note's Markdown back (normalised).

Identity (:func:`assign_ids`): a block whose text is unchanged keeps its id (and its citations), wherever
it moved; a block edited in place (same slot between unchanged neighbours) also keeps its id, so citations
and links survive typo fixes; everything else gets a new id. Only blocks whose text changed are re-indexed.
"""

from __future__ import annotations

import bisect
import difflib
import hashlib
import re
import uuid
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from .models import BlockKind, Citation

_HEADING = re.compile(r"^ {0,3}#{1,6}(\s|$)")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_LIST = re.compile(r"^ {0,3}([-*+]|\d{1,9}[.)])\s")
_QUOTE = re.compile(r"^ {0,3}>")
_TABLE = re.compile(r"^ {0,3}\|")


@dataclass
class DraftBlock:
    text: str
    kind: BlockKind
    citations: list[Citation] = field(default_factory=list)
    block_id: str | None = None
    explicit_citations: bool = False


def new_block_id() -> str:
    return f"blk_{uuid.uuid4().hex[:20]}"


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _kind_of(first_line: str) -> BlockKind:
    if _LIST.match(first_line):
        return "list"
    if _QUOTE.match(first_line):
        return "quote"
    if _TABLE.match(first_line):
        return "table"
    return "paragraph"


def split_markdown(content: str) -> list[DraftBlock]:
    blocks: list[DraftBlock] = []
    buf: list[str] = []
    fence: str | None = None

    def flush(kind: BlockKind | None = None) -> None:
        text = "\n".join(buf).strip("\n")
        if text.strip():
            blocks.append(DraftBlock(text=text, kind=kind or _kind_of(buf[0] if buf else text)))
        buf.clear()

    for line in content.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = line.rstrip()
        if fence is not None:
            buf.append(line)
            if line.strip().startswith(fence):
                flush("code")
                fence = None
            continue
        m = _FENCE.match(line)
        if m:
            flush()
            fence = m.group(1)[0] * 3
            buf.append(line)
            continue
        if _HEADING.match(line):
            flush()
            buf.append(line)
            flush("heading")
            continue
        if not line.strip():
            flush()
            continue
        buf.append(line)
    if fence is not None:
        flush("code")  # an unclosed fence runs to the end, as in CommonMark
    else:
        flush()
    return blocks


def join_blocks(texts: Sequence[str]) -> str:
    return "\n\n".join(texts)


@dataclass(frozen=True)
class OldBlock:
    block_id: str
    text: str
    citations: list[Citation]


def assign_ids(old: Sequence[OldBlock], new: list[DraftBlock]) -> None:
    """Give every draft without an explicit id the id of the old block it continues (see module doc)."""
    old_by_id = {b.block_id: b for b in old}
    taken = {d.block_id for d in new if d.block_id is not None}
    for d in new:  # explicit ids keep the old citations unless the input gave some
        if d.block_id is not None and not d.explicit_citations and d.block_id in old_by_id:
            d.citations = list(old_by_id[d.block_id].citations)
    free_old = [b for b in old if b.block_id not in taken]
    pending = [i for i, d in enumerate(new) if d.block_id is None]

    def adopt(i: int, ob: OldBlock) -> None:
        d = new[i]
        d.block_id = ob.block_id
        if not d.explicit_citations:
            d.citations = list(ob.citations)
        taken.add(ob.block_id)

    def free(i: int, k: int) -> bool:
        return new[i].block_id is None and old[k].block_id not in taken

    # 1. unchanged text in the same slot: the common head and tail, then runs the diff aligns (so of two
    #    identical blocks, the one that was not edited keeps its id, and its citations)
    head = 0
    while head < min(len(old), len(new)) and old[head].text == new[head].text:
        if free(head, head):
            adopt(head, old[head])
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail].text == new[-1 - tail].text:
        if free(len(new) - 1 - tail, len(old) - 1 - tail):
            adopt(len(new) - 1 - tail, old[-1 - tail])
        tail += 1
    if any(new[i].block_id is None for i in pending):
        matcher = difflib.SequenceMatcher(a=[ob.text for ob in old], b=[d.text for d in new], autojunk=False)
        for a0, b0, size in matcher.get_matching_blocks():
            for k in range(size):
                if free(b0 + k, a0 + k):
                    adopt(b0 + k, old[a0 + k])
    # 2. unchanged text keeps its id wherever it moved (first come, first served among duplicates)
    by_text: dict[str, deque[OldBlock]] = defaultdict(deque)
    for ob in free_old:
        if ob.block_id not in taken:
            by_text[ob.text].append(ob)
    for i in pending:
        queue = by_text.get(new[i].text)
        if queue and new[i].block_id is None:
            adopt(i, queue.popleft())
    # 3. edited in place: between two kept blocks that did not move, the leftovers pair up slot by slot
    if any(ob.block_id not in taken for ob in free_old) and any(new[i].block_id is None for i in pending):
        old_index = {ob.block_id: k for k, ob in enumerate(old)}
        kept = [(i, old_index[d.block_id]) for i, d in enumerate(new) if d.block_id in old_index]
        prev_old = -1
        gap: list[int] = []
        anchors = iter([*_increasing(kept), (len(new), len(old))])
        next_i, next_k = next(anchors)
        for i in range(len(new) + 1):
            if i == next_i:
                olds = [old[k] for k in range(prev_old + 1, next_k) if old[k].block_id not in taken]
                for ob, j in zip(olds, gap, strict=False):
                    adopt(j, ob)
                prev_old, gap = next_k, []
                if i < len(new):
                    next_i, next_k = next(anchors)
            elif new[i].block_id is None:
                gap.append(i)
    for d in new:
        if d.block_id is None:
            d.block_id = new_block_id()


def _increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest run of ``(new index, old index)`` pairs whose old indices increase (the blocks that kept
    their order; the others moved)."""
    tails: list[int] = []  # tails[n]: the pair ending the best increasing run of length n+1 (smallest old index)
    tail_keys: list[int] = []  # its old index
    back: list[int] = []
    for p, (_, k) in enumerate(pairs):
        n = bisect.bisect_left(tail_keys, k)
        back.append(tails[n - 1] if n else -1)
        if n == len(tails):
            tails.append(p)
            tail_keys.append(k)
        else:
            tails[n], tail_keys[n] = p, k
    out: list[tuple[int, int]] = []
    p = tails[-1] if tails else -1
    while p != -1:
        out.append(pairs[p])
        p = back[p]
    return out[::-1]
