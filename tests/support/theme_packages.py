"""Theme packages for tests: a good one, and one per kind of attack (built with zipfile, in tmp dirs)."""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path

PNG_1X1 = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d4944415478da63f8cfc0f01f0005000201"
    "a5c0a4e80000000049454e44ae426082"
)
MANIFEST = """theme_id: {theme_id}
name: 海洋 Ocean
version: 1.2.0
author: Test Author
description: A calm blue theme.
min_app_version: {min_app}
is_dark: false
css_entry: theme.css
preview: preview.png
"""
GOOD_CSS = """:root { --accent: #0a66c2; }
body { color: #123; background: url(images/bg.png) no-repeat; }
@media (prefers-color-scheme: dark) { body { color: #eee; } }
@font-face { font-family: X; src: url("fonts/x.woff2") format("woff2"); }
"""


def good_files(theme_id: str = "ocean", min_app: str = "0.1.0", css: str = GOOD_CSS) -> dict[str, bytes]:
    return {
        "theme.yaml": MANIFEST.format(theme_id=theme_id, min_app=min_app).encode(),
        "theme.css": css.encode(),
        "preview.png": PNG_1X1,
        "images/bg.png": PNG_1X1,
        "fonts/x.woff2": b"wOF2" + bytes(60),
    }


def write_zip(path: Path, files: dict[str, bytes], *, symlinks: dict[str, str] | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        for name, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, target)
    return path


def write_folder(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root
