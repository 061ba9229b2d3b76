"""The size of an SVG: read from its viewBox/width/height, and set to what the request asks for.

``width`` and ``height`` both given: the SVG is that box (aspect kept by ``preserveAspectRatio``); one given:
the other follows the aspect ratio; none: the natural size. Mermaid's ``width="100%"`` +
``style="max-width: …"`` become plain numbers, so an exporter can place the image without a layout engine.
"""

from __future__ import annotations

import re

from lxml import etree

_NUMBER = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(px|pt)?\s*$")
_MAX_WIDTH = re.compile(r"max-width:\s*([0-9.]+)px;?\s*", re.I)
PT = 4 / 3


def _length(value: str | None) -> float | None:
    match = _NUMBER.match(value or "")
    if not match:
        return None
    n = float(match.group(1))
    return n * PT if match.group(2) == "pt" else n


def fit_svg(svg: str, width: int | None, height: int | None) -> tuple[str, float, float]:
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    root = etree.fromstring(svg.encode("utf-8"), parser)
    natural_w, natural_h = _natural(root)
    if width and height:
        w, h = float(width), float(height)
    elif width:
        w, h = float(width), float(width) * natural_h / natural_w
    elif height:
        w, h = float(height) * natural_w / natural_h, float(height)
    else:
        w, h = natural_w, natural_h
    if root.get("viewBox") is None:
        root.set("viewBox", f"0 0 {_fmt(natural_w)} {_fmt(natural_h)}")
    root.set("width", _fmt(w))
    root.set("height", _fmt(h))
    style = root.get("style")
    if style is not None:
        style = _MAX_WIDTH.sub("", style).strip()
        if style:
            root.set("style", style)
        else:
            del root.attrib["style"]
    return etree.tostring(root, encoding="unicode"), round(w, 3), round(h, 3)


def _natural(root: etree._Element) -> tuple[float, float]:
    box = (root.get("viewBox") or "").replace(",", " ").split()
    if len(box) == 4:
        try:
            w, h = float(box[2]), float(box[3])
            if w > 0 and h > 0:
                return w, h
        except ValueError:
            pass
    width, height = _length(root.get("width")), _length(root.get("height"))
    if width and height:
        return width, height
    match = _MAX_WIDTH.search(root.get("style") or "")
    if match and height:
        return float(match.group(1)), height
    return 300.0, 150.0  # the CSS default size of a replaced element


def _fmt(v: float) -> str:
    return f"{v:.3f}".rstrip("0").rstrip(".")
