"""What never enters a trace (phase-2 §6.4): API keys, Authorization headers, secret settings, attachment bodies.

:func:`sanitize` returns a JSON-able copy of a value in which

* the string value of a key that names a credential (``api_key``, ``OPENAI_API_KEY``, ``authorization``,
  ``password``, ``client_secret``, ``github_token``, ``cookie``, ...) is ``"[redacted]"`` — token *counts*
  (``input_tokens``, ``max_tokens``) are not credentials;
* strings that look like credentials (``Bearer …``/``Basic …`` values, ``sk-…``/``sk-ant-…`` keys, the user and
  password of a URL, ``?key=``/``?token=`` URL parameters) are cut out, and ``data:`` URIs and long base64 runs
  (an attachment's or image's body) are replaced by a short marker saying what was removed;
* every known secret value passed in ``secrets`` (a run's provider key) is cut out wherever it appears, and so is
  every value :func:`remember_secret` was told about (the master key, every secret the store decrypted or stored);
* strings longer than ``max_chars`` are cut, with the original length noted.

:func:`cut_credentials` is the one text redaction of the process (issue 21): whatever a child printed (a plugin
server's stderr tail), an error detail that leaves the process (a response, a persisted event), every log record
(:class:`RedactingFilter`) and everything a human CLI writes on stderr (:class:`RedactingStream`, installed with the
filter by ``sidecar.cli.output.start_cli``) goes through it.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

from pydantic_core import to_jsonable_python

REDACTED = "[redacted]"

# A key names a credential when (after camelCase → snake_case, lower-cased) it ends with one of these words.
_SECRET_KEY = re.compile(
    r"(?:^|[-_])(?:api[-_]?key|apikey|access[-_]?key|secret(?:[-_]?key)?|token|password|passwd|passphrase"
    r"|private[-_]?key|credentials?|cookie|authorization|auth|bearer|signature)$"
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_BEARER = re.compile(r"\b(Bearer|Basic) ([A-Za-z0-9._~+/-]{12,}=*)")
_KEY_LIKE = re.compile(r"\b(?:sk|sk-ant|sk-proj|pk|rk)-[A-Za-z0-9_-]{16,}\b")
_URL_USERINFO = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@")
_URL_SECRET_PARAM = re.compile(
    r"([?&](?:key|api[-_]?key|apikey|token|access[-_]?token|auth|sig|signature|password)=)[^&#\s]+", re.IGNORECASE
)
_DATA_URI = re.compile(r"data:[\w.+-]+/[\w.+-]+;base64,[A-Za-z0-9+/=\s]{64,}")
_BASE64_BLOB = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{512,}={0,2}")


def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(_CAMEL.sub("_", key).lower()))


def _bearer(match: re.Match[str]) -> str:
    token = match.group(2)
    # a credential has digits or padding; "Basic arithmetic" does not (and is not 12+ chars anyway)
    if any(c.isdigit() for c in token) or token.endswith("="):
        return f"{match.group(1)} {REDACTED}"
    return match.group(0)


_known: frozenset[str] = frozenset()
_known_lock = threading.Lock()


def remember_secret(value: str | None) -> None:
    """Cut ``value`` (6+ characters) out of every later redaction of this process, wherever it appears."""
    global _known
    if value and len(value) >= 6 and value not in _known:
        with _known_lock:
            _known = _known | {value}


def remember_environment_secrets(environ: Mapping[str, str]) -> None:
    """:func:`remember_secret` every value of ``environ`` whose variable names a credential (``OPENAI_API_KEY``,
    ``METONA_SECRET_KEY``, ``GITHUB_TOKEN``, ...; not ``METONA_SECRET_KEY_FILE``, a path)."""
    for name, value in environ.items():
        if is_secret_key(name):
            remember_secret(value.strip())


def cut_secrets(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every known secret value (6+ characters) replaced by ``[redacted]``: those passed in
    ``secrets`` and those :func:`remember_secret` was told about."""
    for secret in (*secrets, *_known):
        if secret and len(secret) >= 6 and secret in text:
            text = text.replace(secret, REDACTED)
    return text


def cut_credentials(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` without the known ``secrets`` and anything that looks like a credential (keys, ``Bearer``/``Basic``
    values, a URL's user and password or key parameters); the rest of the text is left as it is."""
    text = cut_secrets(text, secrets)
    if "Bearer " in text or "Basic " in text:
        text = _BEARER.sub(_bearer, text)
    if "-" in text:
        text = _KEY_LIKE.sub(REDACTED, text)
    if "://" in text:
        text = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    if "=" in text:
        text = _URL_SECRET_PARAM.sub(lambda m: f"{m.group(1)}{REDACTED}", text)
    return text


CUT_OVERLAP_CHARS = 512
"""How far past a cut a redaction looks (plus the longest known secret): a credential split by the cut is seen
whole, so no fragment of it survives the cut (issue 33 §3)."""


def _overlap(secrets: tuple[str, ...]) -> int:
    return CUT_OVERLAP_CHARS + max((len(s) for s in (*secrets, *_known)), default=0)


def redact_head(text: str, limit: int, secrets: Iterable[str] = ()) -> str:
    """The first ``limit`` characters of ``text`` after :func:`cut_credentials` — redact, then cut. Only a window
    past the cut is scanned (a 5 MB message costs no more than a short one); it grows until no fragment of a
    secret cut at the window's end can reach the kept part."""
    known = tuple(secrets)
    overlap = _overlap(known)
    window = limit + 2 * overlap
    while window < len(text):
        red = cut_credentials(text[:window], known)
        if len(red) >= limit + overlap:  # a fragment at the window's end is in the last `overlap` chars
            return red[:limit]
        window *= 2
    return cut_credentials(text, known)[:limit]


def redact_tail(text: str, limit: int, secrets: Iterable[str] = (), *, head_cut: bool = False) -> str:
    """The last ``limit`` characters of ``text`` after :func:`cut_credentials` (see :func:`redact_head`).
    ``head_cut``: ``text`` is itself the tail of something longer (a ring buffer that dropped its oldest bytes),
    so its first characters may be a fragment of a secret: they are never kept."""
    known = tuple(secrets)
    overlap = _overlap(known)
    window = limit + 2 * overlap
    while window < len(text):
        red = cut_credentials(text[-window:], known)
        if len(red) >= limit + overlap:
            return red[-limit:]
        window *= 2
    red = cut_credentials(text, known)
    return (red[overlap:] if head_cut else red)[-limit:]


def clean_text(text: str, secrets: Iterable[str] = (), max_chars: int | None = None) -> str:
    cut = max_chars is not None and len(text) > max_chars
    original = len(text)
    if cut:  # what is not kept is not scanned (a 5 MB argument costs no more than a short one)
        assert max_chars is not None
        text = text[: max_chars + 256]
    text = cut_credentials(text, secrets)
    if "base64," in text:
        text = _DATA_URI.sub(lambda m: f"[attachment body omitted: {len(m.group(0))} chars]", text)
    if len(text) >= 512:
        text = _BASE64_BLOB.sub(lambda m: f"[binary body omitted: {len(m.group(0))} chars]", text)
    if cut:
        assert max_chars is not None
        text = f"{text[:max_chars]}…[truncated: {original} chars]"
    return text


def sanitize(value: Any, *, secrets: Iterable[str] = (), max_chars: int | None = None) -> Any:
    """A JSON-able, redacted copy of ``value`` (see the module doc). Non-finite floats become ``None``."""
    known = tuple(s for s in secrets if s)
    return _walk(to_jsonable_python(value), known, max_chars)


def _walk(value: Any, secrets: tuple[str, ...], max_chars: int | None) -> Any:
    if isinstance(value, str):
        return clean_text(value, secrets, max_chars)
    if isinstance(value, dict):
        return {
            k: REDACTED
            if isinstance(k, str) and isinstance(v, str) and v and is_secret_key(k)
            else _walk(v, secrets, max_chars)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_walk(v, secrets, max_chars) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN/Infinity: one such value must not make a whole batch unwritable
    return value


class RedactingFilter(logging.Filter):
    """A handler filter: the record's message (arguments merged in) and its traceback text pass through
    :func:`cut_credentials` before any formatter sees them."""

    _formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: let the handler report it as it always does
            return True
        record.msg, record.args = cut_credentials(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = cut_credentials(record.exc_text)
        if record.stack_info:
            record.stack_info = cut_credentials(record.stack_info)
        return True


def redact_logs(logger: logging.Logger | None = None) -> None:
    """Put a :class:`RedactingFilter` on every handler of ``logger`` (the root logger by default)."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())


class RedactingStream:
    """A text stream (a CLI's ``sys.stderr``) whose every ``write`` goes through :func:`cut_credentials` first; the
    rest is the wrapped stream's. A credential split across two writes is not recognised: write whole lines."""

    def __init__(self, stream: TextIO) -> None:
        self.wrapped = stream

    def write(self, text: str) -> int:
        self.wrapped.write(cut_credentials(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)
