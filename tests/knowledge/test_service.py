"""KnowledgeService: attachments (copy, hash, mime, limits, in-use) and notes (blocks, ids, citations)."""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from pydantic import ValidationError

from sidecar.core.errors import SidecarError
from sidecar.knowledge.models import BlockInput, Citation, CreateNoteParams, UpdateNoteParams
from sidecar.knowledge.service import KnowledgeService

pytestmark = pytest.mark.anyio


async def _code(coro: object) -> tuple[int, str]:
    with pytest.raises(SidecarError) as info:
        await coro  # type: ignore[misc]
    return info.value.status, info.value.code


async def test_import_copies_hashes_and_sniffs(knowledge: KnowledgeService, tmp_path: Path) -> None:
    src = tmp_path / "lecture.WAV"
    body = b"RIFF\x00\x00\x00\x00WAVEfmt " + bytes(1000)
    src.write_bytes(body)
    att = await knowledge.import_attachment(str(src))
    assert att.filename == "lecture.WAV" and att.size_bytes == len(body)
    assert att.sha256 == hashlib.sha256(body).hexdigest()
    assert att.mime_type in ("audio/wav", "audio/x-wav")
    stored = await knowledge.attachment_path(att.attachment_id)
    assert stored.parent == knowledge.attachments_dir and stored.read_bytes() == body and stored.suffix == ".wav"
    src.unlink()  # the copy is independent of the host file
    assert (await knowledge.get_attachment(att.attachment_id)) == att
    page = await knowledge.list_attachments()
    assert [a.attachment_id for a in page.items] == [att.attachment_id] and page.page.total == 1

    unknown = tmp_path / "blob"
    unknown.write_bytes(b"\x00\x01\x02binary")
    assert (await knowledge.import_attachment(str(unknown), filename="data")).mime_type == "application/octet-stream"
    text = tmp_path / "readme"
    text.write_text("纯文本 plain text", encoding="utf-8")
    assert (await knowledge.import_attachment(str(text))).mime_type == "text/plain"


async def test_import_errors(knowledge: KnowledgeService, tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(bytes(64 * 1024 + 1))
    assert await _code(knowledge.import_attachment(str(big))) == (413, "ATTACHMENT_TOO_LARGE")
    assert await _code(knowledge.import_attachment(str(tmp_path / "missing.txt"))) == (404, "FILE_NOT_FOUND")
    assert await _code(knowledge.import_attachment("relative/path.txt")) == (400, "INVALID_PATH")
    assert await _code(knowledge.import_attachment(str(tmp_path))) == (400, "INVALID_PATH")
    assert list(knowledge.attachments_dir.iterdir()) == [], "nothing half-copied is left behind"
    assert await _code(knowledge.get_attachment("att_nope")) == (404, "ATTACHMENT_NOT_FOUND")
    assert await _code(knowledge.delete_attachment("att_nope")) == (404, "ATTACHMENT_NOT_FOUND")


async def test_cited_attachment_cannot_be_deleted(knowledge: KnowledgeService, tmp_path: Path) -> None:
    src = tmp_path / "talk.mp3"
    src.write_bytes(b"ID3" + bytes(100))
    att = await knowledge.import_attachment(str(src))
    cite = Citation(source_audio=att.attachment_id, start_time=12.4, end_time=18.9, speaker="SPEAKER_00")
    note = await knowledge.create_note(
        CreateNoteParams(
            title="录音", folder="课程/操作系统", blocks=[BlockInput(text="这一部分介绍进程调度。", citations=[cite])]
        )
    )
    assert note.blocks[0].citations == [cite]
    assert await _code(knowledge.delete_attachment(att.attachment_id)) == (409, "ATTACHMENT_IN_USE")
    await knowledge.update_note(
        UpdateNoteParams(note_id=note.note_id, blocks=[BlockInput(text="这一部分介绍进程调度。", citations=[])])
    )
    assert (await knowledge.delete_attachment(att.attachment_id)).deleted
    assert not (knowledge.attachments_dir / f"{att.attachment_id}.mp3").exists()
    bad = CreateNoteParams(title="t", blocks=[BlockInput(text="x", citations=[Citation(attachment_id="att_nope")])])
    assert await _code(knowledge.create_note(bad)) == (404, "ATTACHMENT_NOT_FOUND")


async def test_note_crud_keeps_block_ids(knowledge: KnowledgeService) -> None:
    note = await knowledge.create_note(
        CreateNoteParams(title="OS", folder="/课程//操作系统/", content="# 调度\n\n第一段。\n\n第二段。")
    )
    assert note.folder == "课程/操作系统"
    assert [b.kind for b in note.blocks] == ["heading", "paragraph", "paragraph"]
    assert [b.position for b in note.blocks] == [0, 1, 2]
    ids = [b.block_id for b in note.blocks]
    updated = await knowledge.update_note(
        UpdateNoteParams(note_id=note.note_id, content="# 调度\n\n新插入。\n\n第一段。\n\n第二段（改）。", title="OS 2")
    )
    assert updated.title == "OS 2" and updated.folder == "课程/操作系统"
    new_ids = [b.block_id for b in updated.blocks]
    assert new_ids[0] == ids[0] and new_ids[2] == ids[1], "unchanged blocks keep their ids"
    assert new_ids[1] not in ids
    assert updated.content == "# 调度\n\n新插入。\n\n第一段。\n\n第二段（改）。"
    assert await knowledge.get_note(note.note_id) == updated

    await knowledge.create_note(CreateNoteParams(title="other", folder="课程/数学", content="x"))
    await knowledge.create_note(CreateNoteParams(title="root", content="y"))
    listed = await knowledge.list_notes(folder="课程")
    assert {n.title for n in listed.items} == {"OS 2", "other"} and listed.page.total == 2
    assert (await knowledge.list_notes(folder="课程/操作")).page.total == 0, "a folder prefix is not a folder"
    assert (await knowledge.list_notes(limit=1)).page.total == 3

    assert (await knowledge.delete_note(note.note_id)).deleted
    assert await _code(knowledge.get_note(note.note_id)) == (404, "NOTE_NOT_FOUND")
    assert await _code(knowledge.delete_note(note.note_id)) == (404, "NOTE_NOT_FOUND")


async def test_explicit_block_ids_on_update(knowledge: KnowledgeService) -> None:
    note = await knowledge.create_note(CreateNoteParams(title="t", blocks=[BlockInput(text="a"), BlockInput(text="b")]))
    a, b = note.blocks
    moved = await knowledge.update_note(
        UpdateNoteParams(
            note_id=note.note_id,
            blocks=[BlockInput(text="b, rewritten", block_id=b.block_id), BlockInput(text="a", block_id=a.block_id)],
        )
    )
    assert [(x.block_id, x.text) for x in moved.blocks] == [(b.block_id, "b, rewritten"), (a.block_id, "a")]
    other = await knowledge.create_note(CreateNoteParams(title="o", content="z"))
    foreign = UpdateNoteParams(note_id=note.note_id, blocks=[BlockInput(text="z", block_id=other.blocks[0].block_id)])
    assert await _code(knowledge.update_note(foreign)) == (404, "BLOCK_NOT_FOUND")
    dup = UpdateNoteParams(
        note_id=note.note_id,
        blocks=[BlockInput(text="1", block_id=a.block_id), BlockInput(text="2", block_id=a.block_id)],
    )
    assert await _code(knowledge.update_note(dup)) == (400, "DUPLICATE_BLOCK_ID")
    fresh = CreateNoteParams(title="t", blocks=[BlockInput(text="1", block_id="blk_x")])
    assert await _code(knowledge.create_note(fresh)) == (400, "INVALID_BLOCK")
    assert await _code(knowledge.update_note(UpdateNoteParams(note_id="note_nope", title="x"))) == (
        404,
        "NOTE_NOT_FOUND",
    )


def test_params_validation() -> None:
    with pytest.raises(ValidationError):
        CreateNoteParams(title="t")  # neither content nor blocks
    with pytest.raises(ValidationError):
        CreateNoteParams(title="t", content="x", blocks=[BlockInput(text="x")])
    with pytest.raises(ValidationError):
        Citation(start_time=5, end_time=1)
    with pytest.raises(ValidationError):
        Citation(start_time=-1)
    with pytest.raises(ValidationError):
        CreateNoteParams.model_validate({"title": "t", "content": "x", "colour": "red"})


async def test_change_listener_runs_after_commit_and_its_failure_is_contained(knowledge: KnowledgeService) -> None:
    calls: list[int] = []

    async def listener() -> None:
        calls.append(1)
        raise RuntimeError("indexer down")

    knowledge.add_listener(listener)
    note = await knowledge.create_note(CreateNoteParams(title="t", content="x"))
    await knowledge.update_note(UpdateNoteParams(note_id=note.note_id, title="u"))
    await knowledge.delete_note(note.note_id)
    assert calls == [1, 1, 1]


async def test_import_refuses_unusable_paths_with_a_typed_error(knowledge: KnowledgeService) -> None:
    assert await _code(knowledge.import_attachment("/tmp/a\x00b.txt")) == (400, "INVALID_PATH")
    assert await _code(knowledge.import_attachment("~no_such_user_metona/a.txt")) == (400, "INVALID_PATH")


async def test_a_fifo_swapped_in_after_the_check_does_not_hang_the_copy(
    knowledge: KnowledgeService, tmp_path: Path
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    try:
        with anyio.fail_after(10):  # before the fix the open blocked until a writer came
            with pytest.raises(SidecarError) as info:
                await anyio.to_thread.run_sync(
                    knowledge._copy_in, fifo, "att_000000000000000000000000", "", abandon_on_cancel=True
                )
        assert (info.value.status, info.value.code) == (400, "INVALID_PATH")
    finally:  # release a blocked open, if any
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert list(knowledge.attachments_dir.iterdir()) == []


async def test_restart_removes_files_a_crash_left_without_a_record(knowledge: KnowledgeService, tmp_path: Path) -> None:
    src = tmp_path / "a.pdf"
    src.write_bytes(b"%PDF-1.4 body")
    kept = await knowledge.import_attachment(str(src))
    deleted = await knowledge.import_attachment(str(src))
    # kill -9 after the copy was renamed into place, before the record was inserted
    orphan, *_ = knowledge._copy_in(src, "att_" + "0" * 24, ".pdf")
    # kill -9 after the delete committed, before the file was unlinked
    await knowledge._db.run(
        lambda conn: conn.execute("DELETE FROM kn_attachments WHERE attachment_id = ?", (deleted.attachment_id,))
    )
    (knowledge.attachments_dir / "notes.txt").write_text("not ours")
    await knowledge.migrate()  # what a restart runs before serving
    names = sorted(p.name for p in knowledge.attachments_dir.iterdir())
    assert names == sorted([f"{kept.attachment_id}.pdf", "notes.txt"]), orphan
    assert (await knowledge.attachment_path(kept.attachment_id)).read_bytes() == b"%PDF-1.4 body"


async def test_a_file_that_cannot_be_unlinked_does_not_fail_a_committed_delete(
    knowledge: KnowledgeService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On Windows a file another process holds open cannot be removed: the record is already gone, so the
    delete succeeds (the next start sweeps the file) instead of answering -32603 for a done deletion."""
    src = tmp_path / "a.pdf"
    src.write_bytes(b"%PDF-1.4 body")
    att = await knowledge.import_attachment(str(src))
    real_unlink = Path.unlink

    def busy(self: Path, missing_ok: bool = False) -> None:
        if self.parent == knowledge.attachments_dir:
            raise PermissionError(13, "in use")
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", busy)
    assert (await knowledge.delete_attachment(att.attachment_id)).deleted
    monkeypatch.setattr(Path, "unlink", real_unlink)
    assert await _code(knowledge.get_attachment(att.attachment_id)) == (404, "ATTACHMENT_NOT_FOUND")
    await knowledge.migrate()
    assert list(knowledge.attachments_dir.iterdir()) == []
