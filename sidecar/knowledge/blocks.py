"""Markdown → blocks, and stable block ids across edits.

Splitting is line based and deliberately simple: a heading line is a block; a fenced code block is one
block; otherwise blank lines separate blocks, and a block's kind comes from its first line (list, quote,
table, paragraph). Joining the blocks with blank lines gives the note's Markdown back (normalised).

Identity (:func:`assign_ids`): a block whose text is unchanged keeps its id (and its citations), wherever
it moved; a block edited in place (same slot between unchanged neighbours) also keeps its id, so citations
and links survive typo fixes; everything else gets a new id. Only blocks whose text changed are re-indexed.
"""

from __future__ import annotations

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

    # 1. unchanged text keeps its id, wherever it is (first come, first served among duplicates)
    by_text: dict[str, deque[OldBlock]] = defaultdict(deque)
    for ob in free_old:
        by_text[ob.text].append(ob)
    for i in pending:
        queue = by_text.get(new[i].text)
        if queue:
            adopt(i, queue.popleft())
    # 2. edited in place: pair the leftovers slot by slot between unchanged neighbours
    left_old = [ob for ob in free_old if ob.block_id not in taken]
    left_new = [i for i in pending if new[i].block_id is None]
    if left_old and left_new:
        old_keys = [ob.text for ob in old]
        new_keys = [d.text for d in new]
        matcher = difflib.SequenceMatcher(a=old_keys, b=new_keys, autojunk=False)
        left_old_ids = {ob.block_id for ob in left_old}
        left_new_set = set(left_new)
        for tag, a0, a1, b0, b1 in matcher.get_opcodes():
            if tag != "replace":
                continue
            olds = [old[k] for k in range(a0, a1) if old[k].block_id in left_old_ids and old[k].block_id not in taken]
            news = [k for k in range(b0, b1) if k in left_new_set and new[k].block_id is None]
            for ob, i in zip(olds, news, strict=False):
                adopt(i, ob)
    for d in new:
        if d.block_id is None:
            d.block_id = new_block_id()
