"""Checks on rendered SVG shared by the render tests: parsed, never regex-matched."""

from __future__ import annotations

import hashlib
from typing import Any

from lxml import etree


def req(kind: str, source: str, **kw: Any) -> dict[str, Any]:
    return {"kind": kind, "source": source, "sourceHash": hashlib.sha256(source.encode()).hexdigest(), **kw}


def assert_safe_svg(svg: str) -> etree._Element:
    """No script, no event handler, no foreign HTML element, no reference out of the document."""
    root = etree.fromstring(svg.encode(), etree.XMLParser(resolve_entities=False, no_network=True))
    assert etree.QName(root).localname == "svg"
    for el in root.iter():
        if not isinstance(el.tag, str):
            continue
        name = etree.QName(el).localname
        assert name not in {"script", "img", "iframe", "object", "embed", "animate", "set"}, name
        for key, value in el.attrib.items():
            local = etree.QName(key).localname
            assert not local.lower().startswith("on"), (name, key)
            assert "javascript:" not in value.lower(), (name, key, value)
            if local == "href":
                assert value.startswith(("#", "data:image/")), (name, key, value)
    return root


def text_of(root: etree._Element) -> str:
    return "".join(root.itertext())
