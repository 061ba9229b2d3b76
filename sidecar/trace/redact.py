"""What never enters a trace (phase-2 §6.4): API keys, Authorization headers, secret settings, attachment bodies.

:func:`sanitize` returns a JSON-able copy of a value in which

* the value of a key that names a credential (``api_key``, ``authorization``, ``password``, ``secret``,
  ``access_token``, ``cookie``, ...) is ``"[redacted]"`` — token *counts* (``input_tokens``) are not credentials;
* strings that look like credentials (``Bearer …``, ``sk-…``/``sk-ant-…`` keys, ``data:`` URIs, long base64
  blobs — an attachment's or image's body) are replaced by a short marker saying what was removed;
* every known secret value passed in ``secrets`` (a run's provider key) is cut out wherever it appears;
* strings longer than ``max_chars`` are cut, with the original length noted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from pydantic_core import to_jsonable_python

REDACTED = "[redacted]"

_SECRET_KEY = re.compile(
    r"^(?:authorization|proxy[-_]?authorization|x[-_]?api[-_]?key|api[-_]?key|apikey|secret|client[-_]?secret"
    r"|[a-z0-9_-]*[-_]secret|password|passwd|passphrase|access[-_]?token|refresh[-_]?token|id[-_]?token"
    r"|auth[-_]?token|bearer|token|cookie|set[-_]?cookie|private[-_]?key|credentials?)$",
    re.IGNORECASE,
)
_BEARER = re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE)
_KEY_LIKE = re.compile(r"\b(?:sk|sk-ant|sk-proj|pk|rk)-[A-Za-z0-9_-]{16,}\b")
_DATA_URI = re.compile(r"data:[\w.+-]+/[\w.+-]+;base64,[A-Za-z0-9+/=\s]{64,}")
_BASE64_BLOB = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{512,}={0,2}")


def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.match(key))


def clean_text(text: str, secrets: Iterable[str] = (), max_chars: int | None = None) -> str:
    for secret in secrets:
        if secret and len(secret) >= 6 and secret in text:
            text = text.replace(secret, REDACTED)
    if "earer " in text or "asic " in text:
        text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    if "-" in text:
        text = _KEY_LIKE.sub(REDACTED, text)
    if "base64," in text:
        text = _DATA_URI.sub(lambda m: f"[attachment body omitted: {len(m.group(0))} chars]", text)
    if len(text) >= 512:
        text = _BASE64_BLOB.sub(lambda m: f"[binary body omitted: {len(m.group(0))} chars]", text)
    if max_chars is not None and len(text) > max_chars:
        text = f"{text[:max_chars]}…[truncated: {len(text)} chars]"
    return text


def sanitize(value: Any, *, secrets: Iterable[str] = (), max_chars: int | None = None) -> Any:
    """A JSON-able, redacted copy of ``value`` (see the module doc)."""
    known = tuple(s for s in secrets if s)
    return _walk(to_jsonable_python(value), known, max_chars)


def _walk(value: Any, secrets: tuple[str, ...], max_chars: int | None) -> Any:
    if isinstance(value, str):
        return clean_text(value, secrets, max_chars)
    if isinstance(value, dict):
        return {
            k: (
                REDACTED
                if isinstance(k, str) and is_secret_key(k) and v not in (None, "")
                else _walk(v, secrets, max_chars)
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_walk(v, secrets, max_chars) for v in value]
    return value
