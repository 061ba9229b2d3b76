"""Attachments and notes on SQLite (namespace ``knowledge``). Knows nothing of JSON-RPC.

Tables: ``kn_attachments`` (files copied into ``<data_dir>/attachments/``), ``kn_notes``, ``kn_blocks``
(one row per addressable block: text, kind, position, ``text_hash``, citations as JSON) and
``kn_block_refs`` (which attachments a block's citations cite, so a cited attachment cannot be deleted).

After every committed change the listeners (the retrieval indexer) are awaited; a listener's failure is
logged and never undoes the change: the indexer finds what is still unindexed by comparing hashes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import mimetypes
import os
import re
import sqlite3
import stat
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path

import anyio.to_thread

from sidecar.core.common import Page, PageInfo, now_iso
from sidecar.core.errors import BadRequestError, ConflictError, NotFoundError, PayloadTooLargeError
from sidecar.storage.sqlite import Database

from .blocks import DraftBlock, OldBlock, assign_ids, join_blocks, split_markdown, text_hash
from .models import (
    MAX_BLOCKS_PER_NOTE,
    Attachment,
    BlockInput,
    Citation,
    CreateNoteParams,
    DeleteResult,
    Note,
    NoteBlock,
    NoteSummary,
    UpdateNoteParams,
)

logger = logging.getLogger(__name__)

ATTACHMENTS_DIRNAME = "attachments"
DEFAULT_MAX_ATTACHMENT_BYTES = 512 * 1024 * 1024
MAX_NOTE_CONTENT_CHARS = 5_000_000
_COPY_CHUNK = 1024 * 1024
_SUFFIX = re.compile(r"^\.[A-Za-z0-9]{1,15}$")
_STORED_NAME = re.compile(r"^att_[0-9a-f]{24}(\.[a-z0-9]{1,15})?$")  # what _new_id("att") + a suffix gives

MIGRATIONS: list[str] = [
    """
    CREATE TABLE kn_attachments (
        attachment_id TEXT PRIMARY KEY NOT NULL,
        filename      TEXT NOT NULL,
        mime_type     TEXT NOT NULL,
        size_bytes    INTEGER NOT NULL,
        sha256        TEXT NOT NULL,
        stored_name   TEXT NOT NULL,
        created_at    TEXT NOT NULL
    );
    CREATE INDEX kn_attachments_created ON kn_attachments (created_at);
    CREATE TABLE kn_notes (
        note_id    TEXT PRIMARY KEY NOT NULL,
        title      TEXT NOT NULL,
        folder     TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE INDEX kn_notes_folder ON kn_notes (folder, updated_at);
    CREATE INDEX kn_notes_updated ON kn_notes (updated_at);
    CREATE TABLE kn_blocks (
        block_id  TEXT PRIMARY KEY NOT NULL,
        note_id   TEXT NOT NULL REFERENCES kn_notes (note_id) ON DELETE CASCADE,
        position  INTEGER NOT NULL,
        kind      TEXT NOT NULL,
        text      TEXT NOT NULL,
        text_hash TEXT NOT NULL,
        citations TEXT NOT NULL DEFAULT '[]'
    );
    CREATE INDEX kn_blocks_note ON kn_blocks (note_id, position);
    CREATE TABLE kn_block_refs (
        block_id      TEXT NOT NULL REFERENCES kn_blocks (block_id) ON DELETE CASCADE,
        attachment_id TEXT NOT NULL,
        PRIMARY KEY (block_id, attachment_id)
    );
    CREATE INDEX kn_block_refs_attachment ON kn_block_refs (attachment_id);
    """,
]

Listener = Callable[[], Awaitable[None]]


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def normalize_folder(folder: str | None) -> str | None:
    if folder is None:
        return None
    parts = [p.strip() for p in folder.replace("\\", "/").split("/")]
    joined = "/".join(p for p in parts if p)
    return joined or None


_MAGIC: list[tuple[bytes, str]] = [
    (b"%PDF-", "application/pdf"),
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF8", "image/gif"),
    (b"ID3", "audio/mpeg"),
    (b"OggS", "audio/ogg"),
    (b"fLaC", "audio/flac"),
    (b"PK\x03\x04", "application/zip"),
]


def sniff_mime(filename: str, head: bytes) -> str:
    guessed, _ = mimetypes.guess_type(filename, strict=False)
    if guessed:
        return guessed
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "audio/wav"
    for magic, mime in _MAGIC:
        if head.startswith(magic):
            return mime
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not just a character cut at the end of the sample
            return "application/octet-stream"
    return "text/plain" if b"\x00" not in head else "application/octet-stream"


class KnowledgeService:
    def __init__(
        self, db: Database, data_dir: str | Path, *, max_attachment_bytes: int = DEFAULT_MAX_ATTACHMENT_BYTES
    ) -> None:
        self._db = db
        self.attachments_dir = Path(data_dir) / ATTACHMENTS_DIRNAME
        self.max_attachment_bytes = max_attachment_bytes
        self._listeners: list[Listener] = []

    async def migrate(self) -> None:
        """Migrate, then remove what a crash left in the attachments dir (call before serving requests)."""
        await self._db.migrate("knowledge", MIGRATIONS)
        stored = await self._db.read(
            lambda conn: {r[0] for r in conn.execute("SELECT stored_name FROM kn_attachments")}
        )
        await anyio.to_thread.run_sync(self._clean_leftovers, stored)

    def add_listener(self, listener: Listener) -> None:
        """``listener()`` is awaited after every committed change of notes/blocks."""
        self._listeners.append(listener)

    async def _changed(self) -> None:
        for listener in self._listeners:
            try:
                await listener()
            except Exception:
                logger.exception("a knowledge change listener failed (the change itself is saved)")

    # -- attachments -------------------------------------------------------------------------------

    def _clean_leftovers(self, stored: set[str]) -> None:
        """Delete partial copies, and stored files without a record: an import killed between the rename and
        the insert, a delete killed between the commit and the unlink."""
        self.attachments_dir.mkdir(parents=True, exist_ok=True)
        for part in self.attachments_dir.glob(".*.part"):
            part.unlink(missing_ok=True)
        for path in self.attachments_dir.glob("att_*"):
            if _STORED_NAME.match(path.name) and path.name not in stored and path.is_file():
                try:
                    path.unlink(missing_ok=True)
                except OSError:  # still held open: try again next start
                    logger.warning("could not remove leftover attachment file %s", path.name, exc_info=True)

    def _copy_in(self, source: Path, attachment_id: str, suffix: str) -> tuple[str, int, str, bytes]:
        """Copy ``source`` into the attachments dir (temp name, then rename); return name, size, sha256, head."""
        self.attachments_dir.mkdir(parents=True, exist_ok=True)
        stored_name = attachment_id + suffix
        part = self.attachments_dir / f".{stored_name}.part"
        digest = hashlib.sha256()
        size = 0
        head = b""
        # Non-blocking: if the path became a FIFO since it was checked, opening it must not wait for a writer.
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
        try:
            src_fd = os.open(source, flags)
        except OSError:
            raise BadRequestError("The file cannot be read.", code="INVALID_PATH") from None
        try:
            with open(src_fd, "rb") as src, open(part, "wb") as dst:
                if not stat.S_ISREG(os.fstat(src.fileno()).st_mode):
                    raise BadRequestError("The path is not a regular file.", code="INVALID_PATH")
                while chunk := src.read(_COPY_CHUNK):
                    if not head:
                        head = chunk[:4096]
                    size += len(chunk)
                    if size > self.max_attachment_bytes:
                        raise PayloadTooLargeError(
                            "The file is larger than the attachment size limit.",
                            code="ATTACHMENT_TOO_LARGE",
                            details={"limit_bytes": self.max_attachment_bytes},
                        )
                    digest.update(chunk)
                    dst.write(chunk)
                dst.flush()
                os.fsync(dst.fileno())
            os.replace(part, self.attachments_dir / stored_name)
        except BaseException:
            part.unlink(missing_ok=True)
            raise
        return stored_name, size, digest.hexdigest(), head

    def _check_source(self, raw: str) -> Path:
        if "\x00" in raw:  # os calls raise ValueError on it
            raise BadRequestError("The path is not valid.", code="INVALID_PATH")
        try:
            path = Path(raw).expanduser()
        except RuntimeError:  # "~someone" without such a user
            raise BadRequestError("The path is not valid.", code="INVALID_PATH") from None
        if not path.is_absolute():
            raise BadRequestError("The path must be absolute.", code="INVALID_PATH")
        try:
            st = path.stat()
        except FileNotFoundError:
            raise NotFoundError("The file does not exist.", code="FILE_NOT_FOUND") from None
        except OSError:
            raise BadRequestError("The file cannot be read.", code="INVALID_PATH") from None
        if not path.is_file():
            raise BadRequestError("The path is not a regular file.", code="INVALID_PATH")
        if st.st_size > self.max_attachment_bytes:
            raise PayloadTooLargeError(
                "The file is larger than the attachment size limit.",
                code="ATTACHMENT_TOO_LARGE",
                details={"size_bytes": st.st_size, "limit_bytes": self.max_attachment_bytes},
            )
        if not os.access(path, os.R_OK):
            raise BadRequestError("The file cannot be read.", code="INVALID_PATH")
        return path

    async def import_attachment(self, path: str, filename: str | None = None) -> Attachment:
        source = await anyio.to_thread.run_sync(self._check_source, path)
        name = filename or source.name
        suffix = source.suffix.lower() if _SUFFIX.match(source.suffix) else ""
        attachment_id = _new_id("att")
        stored_name, size, sha, head = await anyio.to_thread.run_sync(self._copy_in, source, attachment_id, suffix)
        att = Attachment(
            attachment_id=attachment_id,
            filename=name,
            mime_type=sniff_mime(name, head),
            size_bytes=size,
            sha256=sha,
            created_at=now_iso(),
        )

        def work(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO kn_attachments (attachment_id, filename, mime_type, size_bytes, sha256, stored_name,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    att.attachment_id,
                    att.filename,
                    att.mime_type,
                    att.size_bytes,
                    att.sha256,
                    stored_name,
                    att.created_at,
                ),
            )

        try:
            await self._db.run(work)
        except BaseException:
            (self.attachments_dir / stored_name).unlink(missing_ok=True)
            raise
        return att

    @staticmethod
    def _attachment_from_row(r: sqlite3.Row) -> Attachment:
        return Attachment(
            attachment_id=r["attachment_id"],
            filename=r["filename"],
            mime_type=r["mime_type"],
            size_bytes=r["size_bytes"],
            sha256=r["sha256"],
            created_at=r["created_at"],
        )

    @staticmethod
    def _attachment_missing(attachment_id: str) -> NotFoundError:
        return NotFoundError(
            "Attachment was not found.", code="ATTACHMENT_NOT_FOUND", details={"attachment_id": attachment_id}
        )

    async def get_attachment(self, attachment_id: str) -> Attachment:
        def work(conn: sqlite3.Connection) -> sqlite3.Row | None:
            return conn.execute("SELECT * FROM kn_attachments WHERE attachment_id = ?", (attachment_id,)).fetchone()

        row = await self._db.read(work)
        if row is None:
            raise self._attachment_missing(attachment_id)
        return self._attachment_from_row(row)

    async def attachment_path(self, attachment_id: str) -> Path:
        """The stored file of an attachment (for other domains, e.g. transcription); never a host path."""

        def work(conn: sqlite3.Connection) -> sqlite3.Row | None:
            return conn.execute(
                "SELECT stored_name FROM kn_attachments WHERE attachment_id = ?", (attachment_id,)
            ).fetchone()

        row = await self._db.read(work)
        if row is None:
            raise self._attachment_missing(attachment_id)
        return self.attachments_dir / row[0]

    async def list_attachments(self, limit: int = 50, offset: int = 0) -> Page[Attachment]:
        def work(conn: sqlite3.Connection) -> tuple[int, list[Attachment]]:
            total = conn.execute("SELECT count(*) FROM kn_attachments").fetchone()[0]
            rows = conn.execute(
                "SELECT * FROM kn_attachments ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?", (limit, offset)
            ).fetchall()
            return int(total), [self._attachment_from_row(r) for r in rows]

        total, items = await self._db.read(work)
        return Page[Attachment](items=items, page=PageInfo(total=total, limit=limit, offset=offset))

    async def delete_attachment(self, attachment_id: str) -> DeleteResult:
        def work(conn: sqlite3.Connection) -> str:
            row = conn.execute(
                "SELECT stored_name FROM kn_attachments WHERE attachment_id = ?", (attachment_id,)
            ).fetchone()
            if row is None:
                raise self._attachment_missing(attachment_id)
            users = [
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT b.note_id FROM kn_block_refs r JOIN kn_blocks b ON b.block_id = r.block_id"
                    " WHERE r.attachment_id = ? LIMIT 20",
                    (attachment_id,),
                )
            ]
            if users:
                raise ConflictError(
                    "The attachment is cited by notes; remove the citations first.",
                    code="ATTACHMENT_IN_USE",
                    details={"attachment_id": attachment_id, "note_ids": users},
                )
            conn.execute("DELETE FROM kn_attachments WHERE attachment_id = ?", (attachment_id,))
            return str(row[0])

        stored_name = await self._db.run(work)
        try:
            await anyio.to_thread.run_sync(lambda: (self.attachments_dir / stored_name).unlink(missing_ok=True))
        except OSError:  # e.g. held open on Windows; the record is gone, the next start removes the file
            logger.warning("could not remove the file of deleted attachment %s", attachment_id, exc_info=True)
        return DeleteResult()

    # -- notes -------------------------------------------------------------------------------------

    @staticmethod
    def _note_missing(note_id: str) -> NotFoundError:
        return NotFoundError("Note was not found.", code="NOTE_NOT_FOUND", details={"note_id": note_id})

    @staticmethod
    def _drafts(content: str | None, blocks: list[BlockInput] | None) -> list[DraftBlock]:
        if content is not None:
            if len(content) > MAX_NOTE_CONTENT_CHARS:
                raise PayloadTooLargeError(
                    "The note is too large.", code="NOTE_TOO_LARGE", details={"limit_chars": MAX_NOTE_CONTENT_CHARS}
                )
            drafts = split_markdown(content)
        else:
            drafts = [
                DraftBlock(
                    text=b.text.strip("\n"),
                    kind=b.kind,
                    citations=list(b.citations),
                    block_id=b.block_id,
                    explicit_citations=True,
                )
                for b in blocks or []
            ]
            if any(not d.text.strip() for d in drafts):
                raise BadRequestError("A block must contain text.", code="INVALID_BLOCK")
            ids = [d.block_id for d in drafts if d.block_id is not None]
            if len(ids) != len(set(ids)):
                raise BadRequestError("A block id is given twice.", code="DUPLICATE_BLOCK_ID")
        if len(drafts) > MAX_BLOCKS_PER_NOTE:
            raise PayloadTooLargeError(
                "The note has too many blocks.", code="NOTE_TOO_LARGE", details={"limit_blocks": MAX_BLOCKS_PER_NOTE}
            )
        return drafts

    @staticmethod
    def _check_refs(conn: sqlite3.Connection, drafts: Iterable[DraftBlock]) -> None:
        refs = {ref for d in drafts for c in d.citations for ref in c.attachment_refs()}
        for ref in sorted(refs):
            if conn.execute("SELECT 1 FROM kn_attachments WHERE attachment_id = ?", (ref,)).fetchone() is None:
                raise KnowledgeService._attachment_missing(ref)

    @staticmethod
    def _write_blocks(conn: sqlite3.Connection, note_id: str, drafts: list[DraftBlock]) -> None:
        """Replace the note's blocks by ``drafts`` (ids already assigned); unchanged rows are left alone."""
        existing = {
            r["block_id"]: r
            for r in conn.execute(
                "SELECT block_id, position, kind, text_hash, citations FROM kn_blocks WHERE note_id = ?", (note_id,)
            )
        }
        keep = {d.block_id for d in drafts}
        gone = [bid for bid in existing if bid not in keep]
        conn.executemany("DELETE FROM kn_blocks WHERE block_id = ?", [(bid,) for bid in gone])
        for pos, d in enumerate(drafts):
            assert d.block_id is not None
            cites = json.dumps([c.model_dump(mode="json", exclude_none=True) for c in d.citations], ensure_ascii=False)
            h = text_hash(d.text)
            row = existing.get(d.block_id)
            if row is None:
                conn.execute(
                    "INSERT INTO kn_blocks (block_id, note_id, position, kind, text, text_hash, citations)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (d.block_id, note_id, pos, d.kind, d.text, h, cites),
                )
            elif (row["position"], row["kind"], row["text_hash"], row["citations"]) != (pos, d.kind, h, cites):
                conn.execute(
                    "UPDATE kn_blocks SET position = ?, kind = ?, text = ?, text_hash = ?, citations = ?"
                    " WHERE block_id = ?",
                    (pos, d.kind, d.text, h, cites, d.block_id),
                )
            else:
                continue
            conn.execute("DELETE FROM kn_block_refs WHERE block_id = ?", (d.block_id,))
            refs = sorted({ref for c in d.citations for ref in c.attachment_refs()})
            conn.executemany(
                "INSERT INTO kn_block_refs (block_id, attachment_id) VALUES (?, ?)", [(d.block_id, r) for r in refs]
            )

    @staticmethod
    def _read_note(conn: sqlite3.Connection, note_id: str) -> Note | None:
        row = conn.execute("SELECT * FROM kn_notes WHERE note_id = ?", (note_id,)).fetchone()
        if row is None:
            return None
        blocks = [
            NoteBlock(
                block_id=b["block_id"],
                position=b["position"],
                kind=b["kind"],
                text=b["text"],
                citations=[Citation.model_validate(c) for c in json.loads(b["citations"])],
            )
            for b in conn.execute(
                "SELECT block_id, position, kind, text, citations FROM kn_blocks WHERE note_id = ? ORDER BY position",
                (note_id,),
            )
        ]
        return Note(
            note_id=row["note_id"],
            title=row["title"],
            folder=row["folder"],
            content=join_blocks([b.text for b in blocks]),
            blocks=blocks,
            created_at=row["created_at"],
            updated_at=row["updated_at"],
        )

    async def create_note(self, p: CreateNoteParams) -> Note:
        drafts = self._drafts(p.content, p.blocks)
        if any(d.block_id is not None for d in drafts):
            raise BadRequestError("A new note's blocks cannot carry block ids.", code="INVALID_BLOCK")
        assign_ids([], drafts)
        note_id = _new_id("note")
        now = now_iso()

        def work(conn: sqlite3.Connection) -> Note:
            self._check_refs(conn, drafts)
            conn.execute(
                "INSERT INTO kn_notes (note_id, title, folder, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                (note_id, p.title, normalize_folder(p.folder), now, now),
            )
            self._write_blocks(conn, note_id, drafts)
            note = self._read_note(conn, note_id)
            assert note is not None
            return note

        note = await self._db.run(work)
        await self._changed()
        return note

    async def import_fixture_notes(self, notes: Sequence[tuple[str, str, str | None, list[tuple[str, str]]]]) -> int:
        """Insert notes keeping the given note and block ids: ``(note_id, title, folder, [(block_id, text)])``.

        For benchmark corpora loaded into an isolated store (their cases name the ids they expect); the user's
        notes are always created through :meth:`create_note`. One transaction; a taken id is a conflict."""
        now = now_iso()

        def work(conn: sqlite3.Connection) -> int:
            for note_id, title, folder, blocks in notes:
                if conn.execute("SELECT 1 FROM kn_notes WHERE note_id = ?", (note_id,)).fetchone():
                    raise ConflictError(
                        "Note already exists.", code="NOTE_ALREADY_EXISTS", details={"note_id": note_id}
                    )
                conn.execute(
                    "INSERT INTO kn_notes (note_id, title, folder, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                    (note_id, title, normalize_folder(folder), now, now),
                )
                drafts = [DraftBlock(text=text, kind="paragraph", block_id=bid) for bid, text in blocks]
                self._write_blocks(conn, note_id, drafts)
            return len(notes)

        count = await self._db.run(work)
        await self._changed()
        return count

    async def update_note(self, p: UpdateNoteParams) -> Note:
        drafts = None if p.content is None and p.blocks is None else self._drafts(p.content, p.blocks)
        now = now_iso()

        def work(conn: sqlite3.Connection) -> Note:
            current = self._read_note(conn, p.note_id)
            if current is None:
                raise self._note_missing(p.note_id)
            if drafts is not None:
                own = {b.block_id for b in current.blocks}
                foreign = [d.block_id for d in drafts if d.block_id is not None and d.block_id not in own]
                if foreign:
                    raise NotFoundError(
                        "A block id does not belong to this note.",
                        code="BLOCK_NOT_FOUND",
                        details={"note_id": p.note_id, "block_ids": foreign[:20]},
                    )
                assign_ids([OldBlock(b.block_id, b.text, b.citations) for b in current.blocks], drafts)
                self._check_refs(conn, drafts)
                self._write_blocks(conn, p.note_id, drafts)
            title = p.title if p.title is not None else current.title
            folder = normalize_folder(p.folder) if p.folder is not None else current.folder
            conn.execute(
                "UPDATE kn_notes SET title = ?, folder = ?, updated_at = ? WHERE note_id = ?",
                (title, folder, now, p.note_id),
            )
            note = self._read_note(conn, p.note_id)
            assert note is not None
            return note

        note = await self._db.run(work)
        await self._changed()
        return note

    async def get_note(self, note_id: str) -> Note:
        note = await self._db.read(lambda conn: self._read_note(conn, note_id))
        if note is None:
            raise self._note_missing(note_id)
        return note

    async def list_notes(self, folder: str | None = None, limit: int = 50, offset: int = 0) -> Page[NoteSummary]:
        where, args = "", []
        norm = normalize_folder(folder)
        if norm is not None:
            where = " WHERE (n.folder = ? OR substr(n.folder, 1, ?) = ?)"
            args = [norm, len(norm) + 1, norm + "/"]

        def work(conn: sqlite3.Connection) -> tuple[int, list[NoteSummary]]:
            total = conn.execute(f"SELECT count(*) FROM kn_notes n{where}", args).fetchone()[0]
            rows = conn.execute(
                "SELECT n.*, (SELECT count(*) FROM kn_blocks b WHERE b.note_id = n.note_id) AS block_count"
                f" FROM kn_notes n{where} ORDER BY n.updated_at DESC, n.rowid DESC LIMIT ? OFFSET ?",
                [*args, limit, offset],
            ).fetchall()
            items = [
                NoteSummary(
                    note_id=r["note_id"],
                    title=r["title"],
                    folder=r["folder"],
                    block_count=r["block_count"],
                    created_at=r["created_at"],
                    updated_at=r["updated_at"],
                )
                for r in rows
            ]
            return int(total), items

        total, items = await self._db.read(work)
        return Page[NoteSummary](items=items, page=PageInfo(total=total, limit=limit, offset=offset))

    async def delete_note(self, note_id: str) -> DeleteResult:
        def work(conn: sqlite3.Connection) -> None:
            if conn.execute("DELETE FROM kn_notes WHERE note_id = ?", (note_id,)).rowcount == 0:
                raise self._note_missing(note_id)

        await self._db.run(work)
        await self._changed()
        return DeleteResult()
