"""Full-text search across Chinese scripts (issue 34): the index and the query are folded to simplified (OpenCC),
so a simplified query finds a traditional note and back; the note itself keeps its own characters."""

from __future__ import annotations

import pytest

from sidecar.knowledge.models import CreateNoteParams
from tests.retrieval.conftest import Env

pytestmark = pytest.mark.anyio


async def test_search_finds_either_script_from_the_other(env: Env) -> None:
    trad = await env.knowledge.create_note(CreateNoteParams(title="t", content="廣州市房地產中介協會分析"))
    simp = await env.knowledge.create_note(CreateNoteParams(title="s", content="进程调度的会议纪要"))
    await env.knowledge.create_note(CreateNoteParams(title="e", content="quarterly revenue meeting"))
    hits = await env.retrieval.search("房地产中介", "fts")
    assert [h.block_id for h in hits.items] == [trad.blocks[0].block_id]
    assert hits.items[0].text == "廣州市房地產中介協會分析"  # the note keeps its own script
    hits = await env.retrieval.search("進程調度", "fts")
    assert [h.block_id for h in hits.items] == [simp.blocks[0].block_id]
    hits = await env.retrieval.search("revenue", "fts")  # text without Han characters is untouched
    assert [h.note_id for h in hits.items] != [] and all(h.text == "quarterly revenue meeting" for h in hits.items)
