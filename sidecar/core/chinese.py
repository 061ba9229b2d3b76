"""Chinese script: simplified and traditional characters, through OpenCC (the ``opencc`` package, BYVoid's own).

Whisper writes Mandarin in traditional characters about as often as in simplified; the app's users mostly read
simplified. :func:`script_for` decides which script a reader wants (a locale such as ``zh-TW`` asks for
traditional, anything else for simplified); :func:`converter` turns text into it; :func:`fold` maps any text to
simplified for matching, so a search in one script finds text written in the other.

OpenCC is imported and its dictionaries loaded on first use (about 10 ms each), never at start-up.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

Script = Literal["simplified", "traditional"]

# OpenCC configurations: from simplified to the traditional variant of a region (character variants only; no
# phrase rewriting, which would change the speaker's words, e.g. 软件 → 軟體)
_TRADITIONAL_CONFIG = {"tw": "s2tw", "hk": "s2hk", "mo": "s2hk"}
_HAN = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")
_LOCK = threading.Lock()


class ScriptChoice(NamedTuple):
    """The script a reader wants and the OpenCC config that writes it from simplified (``""`` for simplified)."""

    script: Script
    config: str


SIMPLIFIED = ScriptChoice("simplified", "")


def script_for(locale: str | None) -> ScriptChoice | None:
    """The script a BCP 47 locale asks for; None when the locale says nothing about Chinese script.

    ``zh-TW``, ``zh-HK``, ``zh-MO``, ``zh-Hant`` (and ``zh-Hant-TW`` …) → traditional; ``zh``, ``zh-CN``,
    ``zh-SG``, ``zh-Hans`` … → simplified; a non-Chinese locale (``en-US``) or none → None."""
    if not locale:
        return None
    parts = [p.lower() for p in re.split(r"[-_]", locale.strip()) if p]
    if not parts or parts[0] not in {"zh", "cmn", "yue"}:
        return None
    rest = parts[1:]
    if "hans" in rest:
        return SIMPLIFIED
    region = next((p for p in rest if p in _TRADITIONAL_CONFIG), None)
    if "hant" in rest:
        return ScriptChoice("traditional", _TRADITIONAL_CONFIG.get(region or "", "s2t"))
    if region is not None:
        return ScriptChoice("traditional", _TRADITIONAL_CONFIG[region])
    return SIMPLIFIED


def resolve_script(*locales: str | None) -> ScriptChoice:
    """The first locale that names a Chinese script wins (request, then the app's); simplified by default."""
    for locale in locales:
        choice = script_for(locale)
        if choice is not None:
            return choice
    return SIMPLIFIED


@functools.cache
def _opencc(config: str) -> Any:
    with _LOCK:  # the first import of the extension from two threads at once
        import opencc

        return opencc.OpenCC(config)


def has_han(text: str) -> bool:
    return _HAN.search(text) is not None


def fold(text: str) -> str:
    """``text`` with every traditional character made simplified (matching only: both sides of a comparison)."""
    return _opencc("t2s").convert(text) if has_han(text) else text


def converter(choice: ScriptChoice) -> Callable[[str], str]:
    """A function writing Chinese text in ``choice``'s script (text without Han characters passes unchanged)."""

    def simplified(text: str) -> str:
        return fold(text)

    if choice.script == "simplified":
        return simplified
    config = choice.config

    def traditional(text: str) -> str:
        # via simplified: Whisper mixes both scripts in one line, and s2* only maps from simplified
        return _opencc(config).convert(fold(text)) if has_han(text) else text

    return traditional
