"""ConfigService: typed app settings (``app_config``) and write-only secret settings (via the SecretStore)."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ..core.common import now_iso
from ..core.errors import BadRequestError
from ..storage.secrets import SecretStore
from ..storage.sqlite import Database
from .models import INT_RANGES, KNOWN_KEYS, SECRET_KEYS

_MIGRATIONS = [
    "CREATE TABLE app_config (key TEXT PRIMARY KEY, value TEXT NOT NULL, updated_at TEXT NOT NULL)",
]
SECRET_PREFIX = "config:"


class ConfigService:
    def __init__(self, db: Database, secrets: SecretStore) -> None:
        self._db = db
        self._secrets = secrets

    async def migrate(self) -> None:
        await self._db.migrate("config", _MIGRATIONS)

    async def get(self, key: str) -> Any:
        if key not in KNOWN_KEYS:
            raise _unknown(key)
        row = await self._db.read(
            lambda conn: conn.execute("SELECT value FROM app_config WHERE key = ?", (key,)).fetchone()
        )
        return json.loads(row[0]) if row else KNOWN_KEYS[key][1]

    async def values(self, keys: list[str] | None = None) -> tuple[dict[str, Any], dict[str, bool]]:
        wanted = list(KNOWN_KEYS) + list(SECRET_KEYS) if keys is None else keys
        for key in wanted:
            if key not in KNOWN_KEYS and key not in SECRET_KEYS:
                raise _unknown(key)
        rows = await self._db.read(lambda conn: conn.execute("SELECT key, value FROM app_config").fetchall())
        stored = {k: json.loads(v) for k, v in rows}
        values = {k: stored.get(k, KNOWN_KEYS[k][1]) for k in wanted if k in KNOWN_KEYS}
        secrets = {k: await self._secrets.has(SECRET_PREFIX + k) for k in wanted if k in SECRET_KEYS}
        return values, secrets

    async def update(self, changes: dict[str, Any]) -> None:
        checked: dict[str, Any] = {}
        for key, value in changes.items():
            if key in SECRET_KEYS:
                raise BadRequestError(
                    f"{key} is a secret: set it with config/secret/set",
                    code="CONFIG_SECRET_WRITE_ONLY",
                    details={"key": key},
                )
            if key not in KNOWN_KEYS:
                raise _unknown(key)
            checked[key] = _check(key, value)
        now = now_iso()

        def write(conn: sqlite3.Connection) -> None:
            for key, value in checked.items():
                if value is None:
                    conn.execute("DELETE FROM app_config WHERE key = ?", (key,))
                else:
                    conn.execute(
                        "INSERT INTO app_config (key, value, updated_at) VALUES (?, ?, ?) ON CONFLICT(key) "
                        "DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                        (key, json.dumps(value), now),
                    )

        await self._db.run(write)

    async def set_secret(self, key: str, value: str) -> None:
        _secret_key(key)
        await self._secrets.set(SECRET_PREFIX + key, value)

    async def delete_secret(self, key: str) -> None:
        _secret_key(key)
        await self._secrets.delete(SECRET_PREFIX + key)

    async def secret(self, key: str) -> str | None:
        """The clear value of a secret setting, for in-process use only."""
        _secret_key(key)
        return await self._secrets.get(SECRET_PREFIX + key)


def _check(key: str, value: Any) -> Any:
    if value is None:
        return None
    types, _default, _doc = KNOWN_KEYS[key]
    if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
        names = "/".join(t.__name__ for t in types)
        raise BadRequestError(
            f"{key} must be a {names} or null", code="VALIDATION_ERROR", details={"key": key, "expected": names}
        )
    if key in INT_RANGES and isinstance(value, int):  # always an int here (its KNOWN_KEYS type); narrows for mypy
        low, high = INT_RANGES[key]
        if not low <= value <= high:
            raise BadRequestError(
                f"{key} must be between {low} and {high}", code="VALIDATION_ERROR", details={"key": key}
            )
    if isinstance(value, str) and not value.strip():
        return None
    if key == "agent.workspaceRoots" and isinstance(value, list):  # always a list here, as above
        return _check_roots(value)
    return value


def _check_roots(value: list[Any]) -> list[str]:
    """Absolute folder paths, normalised (symlinks resolved), without duplicates."""
    import os

    roots: list[str] = []
    for item in value:
        if not isinstance(item, str) or not item or "\x00" in item or not os.path.isabs(item):
            raise BadRequestError(
                "agent.workspaceRoots must list absolute folder paths",
                code="VALIDATION_ERROR",
                details={"key": "agent.workspaceRoots", "value": str(item)[:200]},
            )
        real = os.path.realpath(item)
        if real not in roots:
            roots.append(real)
    return roots


def _unknown(key: str) -> BadRequestError:
    return BadRequestError(
        f"unknown config key {key!r}",
        code="CONFIG_KEY_UNKNOWN",
        details={"key": key, "known": sorted([*KNOWN_KEYS, *SECRET_KEYS])},
    )


def _secret_key(key: str) -> None:
    if key not in SECRET_KEYS:
        raise BadRequestError(
            f"{key!r} is not a secret setting",
            code="CONFIG_KEY_UNKNOWN",
            details={"key": key, "known": list(SECRET_KEYS)},
        )
