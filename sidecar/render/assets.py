"""Where the browser-side assets are (the pinned npm ``mermaid`` bundle), found without importing anything.

Order: ``METONA_MERMAID_JS`` (a path to ``mermaid.min.js``), the binary's bundle
(``<_MEIPASS>/render-assets/mermaid/``), the checkout's ``tools/render/node_modules/mermaid/`` (installed by
``scripts/setup`` with ``npm ci`` from ``tools/render/package-lock.json``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import NamedTuple  # read by `initialize` (capabilities): no dataclass to build

BUNDLE = ("dist", "mermaid.min.js")


class MermaidBundle(NamedTuple):
    path: Path
    version: str


def _candidates() -> list[Path]:
    out: list[Path] = []
    env = os.environ.get("METONA_MERMAID_JS")
    if env:
        out.append(Path(env).expanduser())
    meipass = getattr(sys, "_MEIPASS", None)
    if meipass:
        out.append(Path(meipass, "render-assets", "mermaid", *BUNDLE))
    out.append(Path(__file__).resolve().parents[2] / "tools" / "render" / "node_modules" / "mermaid" / Path(*BUNDLE))
    return out


def find_mermaid_bundle() -> MermaidBundle | None:
    for path in _candidates():
        if path.is_file():
            return MermaidBundle(path, _version(path))
    return None


def _version(bundle: Path) -> str:
    """The package's version from its package.json (two levels up from dist/mermaid.min.js)."""
    try:
        return str(json.loads((bundle.parent.parent / "package.json").read_text("utf-8"))["version"])
    except (OSError, ValueError, KeyError):
        import hashlib

        return "sha256-" + hashlib.sha256(bundle.read_bytes()).hexdigest()[:12]
