"""Secrets at rest: API keys and other write-only settings, encrypted with AES-256-GCM in SQLite.

The master key comes from the host (``METONA_SECRET_KEY``: 32 bytes as base64 or hex — Electron keeps it in
``safeStorage``/the OS keychain) or, failing that, from a key file outside the data directory (created 0600 on
first use; ``--secret-key-file`` / ``METONA_SECRET_KEY_FILE``). A secret's name is bound to its ciphertext as
associated data, so a row copied to another name does not decrypt. Values are never returned by a method,
logged or traced: callers get ``configured: true|false`` and the provider layer gets the clear text in memory.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import logging
import os
import sqlite3
from pathlib import Path

from ..core.common import now_iso
from ..core.errors import SidecarError
from ..core.redact import remember_secret
from .sqlite import Database

logger = logging.getLogger(__name__)

KEY_ENV = "METONA_SECRET_KEY"
_NONCE = 12

_MIGRATIONS = [
    """
    CREATE TABLE secrets (
        name TEXT PRIMARY KEY,
        nonce BLOB NOT NULL,
        ciphertext BLOB NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    )
    """,
]


class SecretKeyError(SidecarError):
    status = 503
    default_code = "SECRET_STORE_UNAVAILABLE"


def _decode_key(raw: str) -> bytes | None:
    raw = raw.strip()
    for decode in (bytes.fromhex, base64.b64decode, base64.urlsafe_b64decode):
        try:
            key = decode(raw)
        except (ValueError, binascii.Error):
            continue
        if len(key) == 32:
            return key
    return None


def load_master_key(key_file: Path) -> bytes:
    """The 32-byte master key: from METONA_SECRET_KEY, else from ``key_file`` (created 0600 if absent)."""
    env = os.environ.get(KEY_ENV)
    if env:
        remember_secret(env.strip())
        key = _decode_key(env)
        if key is None:
            raise SecretKeyError(f"{KEY_ENV} must be 32 bytes in hex or base64")
        return key
    try:
        return _read_or_create(key_file)
    except OSError as exc:
        raise SecretKeyError(f"cannot read or create the secret key file: {exc.strerror}") from None


def _read_or_create(path: Path) -> bytes:
    if path.exists():
        raw = path.read_bytes().decode("ascii", "replace")
        remember_secret(raw.strip())
        key = _decode_key(raw)  # a corrupt file: the typed error below
        if key is None:
            raise SecretKeyError("the secret key file is not a 32-byte key in hex or base64")
        return key
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = os.urandom(32)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(base64.b64encode(key).decode("ascii"))
        fh.flush()
        os.fsync(fh.fileno())
    try:
        os.link(tmp, path)  # atomic and never overwrites a key another process just created
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    return _read_or_create(path)


class SecretStore:
    """Named secrets in the ``secrets`` table, encrypted with the master key."""

    def __init__(self, db: Database, key: bytes) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._db = db
        self._aead = AESGCM(key)

    @classmethod
    async def open(cls, db: Database, key_file: Path) -> SecretStore:
        await db.migrate("secrets", _MIGRATIONS)
        return cls(db, load_master_key(key_file))

    async def set(self, name: str, value: str) -> None:
        await self._db.run(lambda conn: self.put_in(conn, name, value))

    def put_in(self, conn: sqlite3.Connection, name: str, value: str) -> None:
        """Store ``name`` inside the caller's transaction (``Database.run``): a record and its secret commit
        together or not at all."""
        remember_secret(value)
        nonce = os.urandom(_NONCE)
        ciphertext = self._aead.encrypt(nonce, value.encode("utf-8"), name.encode("utf-8"))
        now = now_iso()
        conn.execute(
            "INSERT INTO secrets (name, nonce, ciphertext, created_at, updated_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(name) DO UPDATE SET nonce = excluded.nonce, ciphertext = excluded.ciphertext, "
            "updated_at = excluded.updated_at",
            (name, nonce, ciphertext, now, now),
        )

    @staticmethod
    def delete_in(conn: sqlite3.Connection, name: str) -> int:
        """Remove ``name`` inside the caller's transaction; the number of rows removed."""
        return conn.execute("DELETE FROM secrets WHERE name = ?", (name,)).rowcount

    async def get(self, name: str) -> str | None:
        """The clear text of ``name`` (None if unset). For the provider layer's memory only — never return it."""
        row = await self._db.read(
            lambda conn: conn.execute("SELECT nonce, ciphertext FROM secrets WHERE name = ?", (name,)).fetchone()
        )
        if row is None:
            return None
        from cryptography.exceptions import InvalidTag

        try:
            value = self._aead.decrypt(row[0], row[1], name.encode("utf-8")).decode("utf-8")
        except InvalidTag:
            logger.error("secret %r cannot be decrypted (was the master key changed?)", name)
            raise SecretKeyError(
                "a stored secret cannot be decrypted with the current master key; set it again",
                details={"secret": name},
            ) from None
        remember_secret(value)  # from now on cut out of every log line, error detail and child output
        return value

    async def has(self, name: str) -> bool:
        row = await self._db.read(lambda conn: conn.execute("SELECT 1 FROM secrets WHERE name = ?", (name,)).fetchone())
        return row is not None

    async def names(self, prefix: str = "") -> builtins.set[str]:
        rows = await self._db.read(
            lambda conn: conn.execute(
                "SELECT name FROM secrets WHERE substr(name, 1, ?) = ?", (len(prefix), prefix)
            ).fetchall()
        )
        return {r[0] for r in rows}

    async def delete(self, name: str) -> bool:
        return bool(await self._db.run(lambda conn: self.delete_in(conn, name)))
