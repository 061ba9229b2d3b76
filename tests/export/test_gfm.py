"""The GFM extensions the exporter supports (tables, strikethrough, bare-URL autolinks, task lists), through the
HTML writer, against markdown-it's GFM fixtures (pinned copies in ``fixtures/markdown-it/``, MIT), compared as the
CommonMark test compares. Where our markup differs by design: ``<del>`` for strikethrough (as the GFM spec writes
it; the fixtures use ``<s>``) and our own class names on task-list items (``li.task``, no classes on the list or
the check box, no space between box and text); deviations follow the CommonMark test's rules."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .cmark import export_body, normalise
from .test_commonmark import RULES

FIXTURES = Path(__file__).parent / "fixtures" / "markdown-it"
DEVIATIONS = {("linkify", "coverage, negative link level"): "sanitised"}  # a stray </a>, closed as a browser does


def _cases(name: str) -> list[tuple[str, str, str, str]]:
    """markdown-it's fixture format: an optional title line, then ``.``, Markdown, ``.``, HTML, ``.``."""
    lines = (FIXTURES / f"{name}.md").read_text("utf-8").split("\n")
    out, title, i = [], "", 0
    while i < len(lines):
        if lines[i] != ".":
            title = lines[i] if lines[i].strip() else title
            i += 1
            continue
        j = lines.index(".", i + 1)
        k = lines.index(".", j + 1)
        out.append((name, title, "\n".join(lines[i + 1 : j]) + "\n", "\n".join(lines[j + 1 : k]) + "\n"))
        title, i = "", k + 1
    return out


def _ours_as_gfm(tokens: list[tuple]) -> list[tuple]:
    """Class names aside on lists, items and check boxes; no space after a check box."""
    out: list[tuple] = []
    for tok in tokens:
        if tok[0] == "<" and tok[1] in ("ul", "ol", "li", "input"):
            tok = ("<", tok[1], tuple(a for a in tok[2] if a[0] != "class"))
        if tok[0] == "t" and out and out[-1] == (">", "input"):
            tok = ("t", tok[1].lstrip(" "))
            if not tok[1]:
                continue
        if tok[0] == "<" and tok[1] == "input":
            tok = ("<", "input", tuple(sorted((k, "") if k in ("checked", "disabled") else (k, v) for k, v in tok[2])))
        out.append(tok)
    return out


CASES = [c for name in ("tables", "strikethrough", "linkify", "tasklists") for c in _cases(name)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}:{c[1][:40]}")
def test_gfm_fixture(case: tuple[str, str, str, str]) -> None:
    name, title, markdown, html = case
    html = re.sub(r"<(/?)s>", r"<\1del>", html)
    ours, _ = export_body(markdown)
    rule = DEVIATIONS.get((name, title))
    if rule is None:
        assert _ours_as_gfm(normalise(ours)) == _ours_as_gfm(normalise(html)), markdown
        return
    on_spec, on_ours = RULES[rule]
    assert normalise(ours) != normalise(html)
    assert normalise(on_ours(ours)) == normalise(on_spec(html)), markdown


def test_every_fixture_file_is_read() -> None:
    names = ("tables", "strikethrough", "linkify", "tasklists")
    counts = {name: sum(1 for c in CASES if c[0] == name) for name in names}
    assert counts == {"tables": 42, "strikethrough": 15, "linkify": 31, "tasklists": 20}
