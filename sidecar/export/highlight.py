"""Pygments for the exporters, safe to use from several worker threads at once (issue 21).

``pygments.lexers`` loads its lexer classes lazily (a module ``__getattr__`` filling a shared cache): two exports
rendering on two worker threads at once could both be the first, and one of them then failed with
``ImportError: cannot import name 'TextLexer' from 'pygments.lexers'`` about one time in four. Every lookup that
may import (lexer by name, style by name, the style list, the formatter class) goes through one lock here; the
lexing and formatting themselves run unlocked.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

_lock = threading.RLock()


@functools.lru_cache(maxsize=64)
def _lexer_class(language: str) -> Any:
    from pygments.lexers import TextLexer, get_lexer_by_name
    from pygments.util import ClassNotFound

    if not language:
        return TextLexer
    try:
        return type(get_lexer_by_name(language))
    except ClassNotFound:
        return TextLexer


def lexer(language: str | None) -> Any:
    """A fresh lexer for ``language`` (plain text when it is empty or unknown), newlines kept."""
    with _lock:
        cls = _lexer_class(language or "")
    return cls(stripnl=False)


def style_names() -> frozenset[str]:
    with _lock:
        from pygments.styles import get_all_styles

        return frozenset(get_all_styles())


def style(name: str) -> Any:
    with _lock:
        from pygments.styles import get_style_by_name

        return get_style_by_name(name)


def html_formatter(**options: Any) -> Any:
    with _lock:
        from pygments.formatters import HtmlFormatter

    return HtmlFormatter(**options)
