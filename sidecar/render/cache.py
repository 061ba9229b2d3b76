"""The on-disk render cache: ``<data-dir>/render-cache/<k[:2]>/<k>.json``, size-bounded, LRU by mtime.

The key is a SHA-256 over (renderer version, kind, theme, width, height, format, source hash): a changed
renderer version never serves an old image. Entries are written by temp file + rename (no fsync: the cache
is disposable), so a crash leaves the old state or the whole new entry; a damaged entry (power cut) reads as
a miss and is removed. A hit touches the file's mtime; when the total passes ``max_bytes`` the least recently
used entries go first. Methods are blocking: the service calls them in a worker thread.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import uuid
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 64 * 1024 * 1024


def cache_key(*parts: object) -> str:
    return hashlib.sha256(json.dumps([str(p) for p in parts]).encode()).hexdigest()


class RenderCache:
    def __init__(self, root: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._sizes: dict[Path, int] | None = None  # path -> size, scanned on first use

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def _index(self) -> dict[Path, int]:
        if self._sizes is None:
            sizes: dict[Path, int] = {}
            if self.root.is_dir():
                for path in self.root.glob("*/*.json"):
                    try:
                        sizes[path] = path.stat().st_size
                    except OSError:
                        continue
            self._sizes = sizes
        return self._sizes

    def get(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        with self._lock:
            try:
                data = json.loads(path.read_text("utf-8"))
                os.utime(path)
            except FileNotFoundError:
                self.misses += 1
                return None
            except (OSError, ValueError):
                logger.warning("render cache: unreadable entry %s removed", path.name)
                self._remove(path)
                self.misses += 1
                return None
            self.hits += 1
            return data

    def put(self, key: str, value: dict[str, Any]) -> None:
        path = self._path(key)
        body = json.dumps(value, ensure_ascii=False).encode("utf-8")
        if len(body) > self.max_bytes:
            return
        with self._lock:
            index = self._index()
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
            try:
                tmp.write_bytes(body)  # no fsync: an entry lost or torn by a power cut reads as a miss
                os.replace(tmp, path)
            except OSError as exc:
                logger.warning("render cache: could not store an entry: %s", exc)
                tmp.unlink(missing_ok=True)
                return
            index[path] = len(body)
            self._evict(index)

    def _evict(self, index: dict[Path, int]) -> None:
        total = sum(index.values())
        if total <= self.max_bytes:
            return
        by_age = []
        for path in index:
            try:
                by_age.append((path.stat().st_mtime_ns, path))
            except OSError:
                by_age.append((0, path))
        for _, path in sorted(by_age):
            if total <= self.max_bytes:
                break
            total -= index.get(path, 0)
            self._remove(path)

    def _remove(self, path: Path) -> None:
        path.unlink(missing_ok=True)
        if self._sizes is not None:
            self._sizes.pop(path, None)

    def stats(self) -> dict[str, int]:
        with self._lock:
            index = self._index()
            return {
                "entries": len(index),
                "bytes": sum(index.values()),
                "max_bytes": self.max_bytes,
                "hits": self.hits,
                "misses": self.misses,
            }
