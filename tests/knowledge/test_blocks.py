"""Markdown → blocks, and block identity across edits (pure functions)."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sidecar.knowledge.blocks import DraftBlock, OldBlock, assign_ids, join_blocks, split_markdown
from sidecar.knowledge.models import Citation

DOC = """# 进程调度

操作系统通过进程调度算法分配 CPU。
第二行属于同一段。

- 先来先服务
- 时间片轮转

```python
def f():

    return 1
```

> 引用一句话

| a | b |
|---|---|
| 1 | 2 |
## English heading
Plain paragraph."""


def test_split_kinds_and_round_trip() -> None:
    blocks = split_markdown(DOC)
    assert [(b.kind, b.text.split("\n")[0]) for b in blocks] == [
        ("heading", "# 进程调度"),
        ("paragraph", "操作系统通过进程调度算法分配 CPU。"),
        ("list", "- 先来先服务"),
        ("code", "```python"),
        ("quote", "> 引用一句话"),
        ("table", "| a | b |"),
        ("heading", "## English heading"),
        ("paragraph", "Plain paragraph."),
    ]
    assert "\n\n    return 1\n```" in blocks[3].text, "a blank line inside a fence does not split it"
    again = split_markdown(join_blocks([b.text for b in blocks]))
    assert [b.text for b in again] == [b.text for b in blocks]


def test_unclosed_fence_and_crlf() -> None:
    blocks = split_markdown("a\r\nb\r\n\r\n```\ncode\n\nmore")
    assert [(b.kind, b.text) for b in blocks] == [("paragraph", "a\nb"), ("code", "```\ncode\n\nmore")]
    assert split_markdown("  \n\n\t\n") == []


def _old(texts: list[str]) -> list[OldBlock]:
    return [OldBlock(f"id{i}", t, [Citation(speaker=f"S{i}")]) for i, t in enumerate(texts)]


def test_unchanged_text_keeps_its_id_even_when_moved() -> None:
    old = _old(["a", "b", "c", "d"])
    new = [DraftBlock(t, "paragraph") for t in ["d", "a", "new", "c"]]
    assign_ids(old, new)
    assert [d.block_id for d in new][:2] == ["id3", "id0"] and new[3].block_id == "id2"
    assert new[0].citations == [Citation(speaker="S3")], "citations follow the block"
    assert new[2].block_id == "id1", "'new' took the slot of the removed 'b' (an edit in place)"


def test_edit_in_place_keeps_the_id_and_insertions_get_new_ids() -> None:
    old = _old(["title", "para one", "para two"])
    new = [DraftBlock(t, "paragraph") for t in ["title", "para one (fixed typo)", "inserted", "para two"]]
    assign_ids(old, new)
    assert new[0].block_id == "id0" and new[3].block_id == "id2"
    assert new[1].block_id == "id1", "the edited block keeps its identity and citations"
    assert new[1].citations == [Citation(speaker="S1")]
    assert new[2].block_id is not None and new[2].block_id.startswith("blk_")


def test_duplicates_are_matched_one_to_one() -> None:
    old = _old(["x", "x"])
    new = [DraftBlock("x", "paragraph"), DraftBlock("x", "paragraph"), DraftBlock("x", "paragraph")]
    assign_ids(old, new)
    ids = [d.block_id for d in new]
    assert ids[:2] == ["id0", "id1"] and ids[2] not in ("id0", "id1") and len(set(ids)) == 3


def test_editing_one_of_two_identical_blocks_does_not_swap_their_ids() -> None:
    """A transcript says "Okay." twice, each block citing its own time: fixing the first one must leave the
    second one's id (and its citation) alone, not hand them over to the edited block."""
    old = _old(["Okay.", "Okay."])
    new = [DraftBlock("Okay, fine.", "paragraph"), DraftBlock("Okay.", "paragraph")]
    assign_ids(old, new)
    assert [d.block_id for d in new] == ["id0", "id1"]
    assert [d.citations for d in new] == [[Citation(speaker="S0")], [Citation(speaker="S1")]]
    old = _old(["x", "x", "b", "c"])
    new = [DraftBlock(t, "paragraph") for t in ["x edited", "x", "b", "c edited"]]
    assign_ids(old, new)
    assert [d.block_id for d in new] == ["id0", "id1", "id2", "id3"]


_MARKDOWN_LINES = ["", " ", "# h", "## 标题", "para", "第二行", "- item", "1. one", "> q", "| a |", "```", "```py"]
_ODD_LINES = ["~~~", "````", "    code", "\t", "text  ", "#nospace", "a\r", "\u3000", "\x0c", "\u2028x", "\x85", "x```"]
_LINES = st.sampled_from([*_MARKDOWN_LINES, *_ODD_LINES])
_DOCS = st.lists(st.one_of(_LINES, st.text(max_size=12)), max_size=30).map("\n".join)


@settings(max_examples=400, deadline=None)
@given(_DOCS)
def test_split_never_fails_and_is_stable_under_its_own_round_trip(doc: str) -> None:
    blocks = split_markdown(doc)
    assert all(b.text.strip() and b.text == b.text.strip("\n") for b in blocks)
    again = split_markdown(join_blocks([b.text for b in blocks]))
    assert [(b.kind, b.text) for b in again] == [(b.kind, b.text) for b in blocks]


@settings(max_examples=400, deadline=None)
@given(_DOCS, st.data())
def test_editing_one_block_keeps_every_other_id(doc: str, data: st.DataObject) -> None:
    blocks = split_markdown(doc)
    assume(blocks)
    assign_ids([], blocks)
    old = [OldBlock(b.block_id or "", b.text, []) for b in blocks]
    i = data.draw(st.integers(0, len(blocks) - 1))
    texts = [b.text for b in blocks]
    texts[i] += " edited"
    new = split_markdown(join_blocks(texts))
    assume(len(new) == len(blocks))  # the edit did not change how the text splits
    assign_ids(old, new)
    assert [d.block_id for d in new] == [b.block_id for b in old]
