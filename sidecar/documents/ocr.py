"""OCR of one page image with Debian's Tesseract (``tesseract`` with ``eng`` and ``chi_sim``), run as a child of the
document worker.

Why Tesseract (measured, README "Documents"): it is a system package with its language data, nothing downloads,
and one page at 200 dpi reads in ~2 s (English) to ~4.5 s (``chi_sim+eng``) on one core of this machine. Tesseract's
OpenMP threads spin when the other core is busy (measured: 30 s a page instead of 4 s), so each process gets
``OMP_THREAD_LIMIT=1`` and the worker reads two pages at once instead.

The TSV output keeps Tesseract's layout analysis: words → lines → paragraphs → blocks; a paragraph becomes a block,
a short paragraph whose words are much taller than the page's median is a heading. Spaces Tesseract puts between
CJK characters are removed.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
from dataclasses import dataclass
from pathlib import Path

from sidecar.core.childenv import scrubbed_environ

from .blocks import DocBlock, clean_inline, heading_text, join_lines

DPI = 200
DEFAULT_LANGUAGES = ("chi_sim", "eng")
TESSERACT = "tesseract"


class OcrFailed(Exception):
    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


def executable() -> str | None:
    return shutil.which(TESSERACT)


def installed_languages() -> set[str]:
    exe = executable()
    if exe is None:
        return set()
    try:
        out = subprocess.run(
            [exe, "--list-langs"], capture_output=True, text=True, timeout=20, env=_env(), check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return {ln.strip() for ln in out.splitlines()[1:] if ln.strip()}


def _env() -> dict[str, str]:
    env = scrubbed_environ(os.environ)  # the worker's own (worker_env: no secrets), scrubbed again all the same
    env["OMP_THREAD_LIMIT"] = "1"
    return env


@dataclass
class _Word:
    block: int
    par: int
    line: int
    text: str
    height: int


def read_image(image: Path, languages: list[str], timeout_s: float) -> list[tuple[str, str]]:
    """``(kind, text)`` per paragraph of the page image, in reading order."""
    exe = executable()
    if exe is None:
        raise OcrFailed("OCR_UNAVAILABLE", "tesseract is not installed")
    try:
        proc = subprocess.run(
            [exe, str(image), "stdout", "-l", "+".join(languages), "--psm", "3", "tsv"],
            capture_output=True,
            timeout=timeout_s,
            env=_env(),
            check=False,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired:
        raise OcrFailed("OCR_TIMEOUT", f"more than {timeout_s:g} s") from None
    except OSError as exc:
        raise OcrFailed("OCR_UNAVAILABLE", type(exc).__name__) from None
    if proc.returncode != 0:
        raise OcrFailed("OCR_FAILED", proc.stderr.decode("utf-8", "replace")[-300:])
    return paragraphs(proc.stdout.decode("utf-8", "replace"))


def paragraphs(tsv: str) -> list[tuple[str, str]]:
    words: list[_Word] = []
    for row in tsv.splitlines()[1:]:
        cols = row.split("\t")
        if len(cols) < 12 or cols[0] != "5" or not cols[11].strip():
            continue
        try:
            words.append(_Word(int(cols[2]), int(cols[3]), int(cols[4]), cols[11], int(cols[9])))
        except ValueError:
            continue
    if not words:
        return []
    median_h = statistics.median(w.height for w in words)
    out: list[tuple[str, str]] = []
    groups: dict[tuple[int, int], list[_Word]] = {}
    for w in words:
        groups.setdefault((w.block, w.par), []).append(w)
    for ws in groups.values():
        lines: dict[int, list[str]] = {}
        for w in ws:
            lines.setdefault(w.line, []).append(w.text)
        text = clean_inline(join_lines(" ".join(line) for line in lines.values()))
        if not text:
            continue
        tall = statistics.median(w.height for w in ws) >= 1.35 * median_h
        if tall and len(lines) <= 2 and len(text) <= 120:
            out.append(("heading", heading_text(2, text)))
        else:
            out.append(("paragraph", text))
    return out


SCRIPT_LANGUAGES = {"Latin": ["eng"], "Han": ["chi_sim"], "HanS": ["chi_sim"]}
"""Han alone, not Han + English: with ``eng`` beside it Tesseract read Chinese product names as Latin letters
(measured on 30 printed lines of a real price list: character recall 0.78 with ``chi_sim+eng``, 0.97 with
``chi_sim``, which reads the digits and Latin words of a Chinese page itself)."""


def detect_languages(image: Path, timeout_s: float) -> list[str] | None:
    """The languages for a page whose script nothing else tells: Tesseract's script detection (OSD) on the page
    at half resolution (~1 s), Latin → ``eng``, Han → ``chi_sim``; None when it cannot tell."""
    exe = executable()
    if exe is None:
        return None
    from PIL import Image

    small = image.with_name(image.stem + "-osd.png")
    try:
        with Image.open(image) as im:
            im.resize((max(1, im.width // 2), max(1, im.height // 2))).save(small)
        proc = subprocess.run(
            [exe, str(small), "stdout", "--psm", "0"],
            capture_output=True,
            timeout=timeout_s,
            env=_env(),
            check=False,
            start_new_session=True,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    finally:
        small.unlink(missing_ok=True)
    for line in proc.stdout.decode("utf-8", "replace").splitlines():
        if line.startswith("Script:"):
            return SCRIPT_LANGUAGES.get(line.split(":", 1)[1].strip())
    return None


def page_blocks(image: Path, languages: list[str], timeout_s: float, page: int | None) -> list[DocBlock]:
    return [DocBlock(kind, text, page) for kind, text in read_image(image, languages, timeout_s)]
