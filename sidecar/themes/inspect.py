"""Inspection of a theme package (phase-2 §11.3): a .zip or a folder with ``theme.yaml`` at its root (or in its
one top folder), read into memory with every path checked, then the manifest, the CSS and the preview.

* Paths (``THEME_RESOURCE_OUTSIDE_PACKAGE``): absolute names, drive letters, backslashes, ``..`` components,
  symlinks (zip entries whose mode says link; links anywhere in a folder, never followed) and special files are
  refused; a CSS ``url()`` must resolve inside the package.
* Manifest (``THEME_MANIFEST_INVALID``): the §11.1 fields with their types, ``theme_id`` a lowercase slug,
  ``version``/``min_app_version`` semver, ``css_entry``/``preview`` files of the package; the preview's content
  must be a PNG/JPEG/WebP/GIF (magic bytes, not the extension).
* CSS (``THEME_CSS_UNSAFE``): every ``.css`` file parsed with tinycss2 and size-bounded; refused on a syntax
  error, ``@import``, a remote or ``javascript:`` ``url()``, ``expression()``, ``behavior``, ``-moz-binding``.
  Scripts and markup (``.js``, ``.html``, ...) are refused; SVG resources must come out of the SVG sanitiser
  unchanged.
* Bounds: at most :data:`MAX_FILES` files and :data:`MAX_TOTAL_BYTES` uncompressed (a zip's declared sizes are
  not trusted: reads stop at the bound).
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import yaml

from .errors import ThemeCssUnsafe, ThemeManifestInvalid, ThemePackageNotFound, ThemeResourceOutsidePackage
from .models import THEME_ID_PATTERN, ThemeManifest

MAX_FILES = 500
MAX_TOTAL_BYTES = 20 * 1024 * 1024
MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_CSS_BYTES = 512 * 1024
MAX_MANIFEST_BYTES = 64 * 1024
MANIFEST = "theme.yaml"
SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z.-]+)?$"
)
_REQUIRED = {
    "theme_id": str,
    "name": str,
    "version": str,
    "author": str,
    "min_app_version": str,
    "is_dark": bool,
    "css_entry": str,
}
_OPTIONAL = {"description": str, "preview": str}
_FORBIDDEN_EXT = {
    ".js",
    ".mjs",
    ".cjs",
    ".html",
    ".htm",
    ".xhtml",
    ".xml",
    ".php",
    ".exe",
    ".dll",
    ".so",
    ".dylib",
    ".sh",
    ".bat",
    ".cmd",
    ".ps1",
    ".py",
    ".wasm",
    ".jar",
    ".htc",
    ".xbl",
}
_IMAGE_MAGIC = {"png": (b"\x89PNG\r\n\x1a\n",), "jpeg": (b"\xff\xd8\xff",), "gif": (b"GIF87a", b"GIF89a")}
_EXT_KIND = {".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg", ".gif": "gif", ".webp": "webp"}
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
_SAFE_DATA = re.compile(
    r"^data:(?:image/(?:png|jpeg|gif|webp)|font/(?:woff2?|ttf|otf)|application/font-woff2?)[;,]", re.I
)
# functions that take a bare string as a URL
_URL_STRING_FUNCTIONS = frozenset(
    {"url", "src", "image-set", "-webkit-image-set", "cross-fade", "-webkit-cross-fade", "image", "-webkit-image"}
)
_SCRIPTY = re.compile(r"javascript:|vbscript:|expression\s*\(", re.I)


@dataclass
class Package:
    files: dict[str, bytes]  # posix relative path -> content
    manifest: ThemeManifest
    warnings: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------------------- reading
def read_package(host_path: str) -> dict[str, bytes]:
    path = Path(host_path).expanduser()
    try:
        path.stat()  # exists() hides why: a name too long or a NUL (found by the schema fuzz) raised out of here
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not a usable path"
        raise ThemePackageNotFound(
            f"The theme package does not exist ({reason}).", details={"path": str(path)[:500]}
        ) from None
    if path.is_dir():
        files = _read_folder(path)
    elif path.is_file() and zipfile.is_zipfile(path):
        files = _read_zip(path)
    else:
        raise ThemeManifestInvalid("A theme package is a .zip file or a folder.", details={"path": str(path)})
    for name in files:  # "a" and "a/b" cannot both be written out
        parent = posixpath.dirname(name)
        while parent:
            if parent in files:
                raise ThemeManifestInvalid(
                    f"The package entry {parent[:200]!r} is both a file and a folder.", details={"path": parent[:500]}
                )
            parent = posixpath.dirname(parent)
    return _strip_top_folder(files)


def _outside(name: str, why: str) -> ThemeResourceOutsidePackage:
    return ThemeResourceOutsidePackage(f"The package entry {name[:200]!r} {why}.", details={"path": name[:500]})


def _check_name(name: str) -> str:
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        raise _outside(name, "is an absolute path")
    if "\\" in name or "\x00" in name:
        raise _outside(name, "has a backslash or NUL in its name")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise _outside(name, "climbs out of the package (..)")
    return "/".join(parts)


class _Budget:
    def __init__(self) -> None:
        self.files = 0
        self.bytes = 0

    def add(self, name: str, size: int) -> None:
        self.files += 1
        self.bytes += size
        if self.files > MAX_FILES:
            raise ThemeManifestInvalid(f"The package has more than {MAX_FILES} files.")
        if size > MAX_FILE_BYTES or self.bytes > MAX_TOTAL_BYTES:
            raise ThemeManifestInvalid(
                f"The package is too large (a file over {MAX_FILE_BYTES} bytes or more than {MAX_TOTAL_BYTES} in all).",
                details={"path": name},
            )


def _read_zip(path: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    budget = _Budget()
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                name = _check_name(info.filename)
                kind = stat.S_IFMT(info.external_attr >> 16)  # 0 when the zip tool recorded no file type
                if kind == stat.S_IFLNK:
                    raise _outside(info.filename, "is a symbolic link")
                if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
                    raise _outside(info.filename, "is not a regular file")
                if info.is_dir() or not name:
                    continue
                if info.flag_bits & 0x1:
                    raise ThemeManifestInvalid("Encrypted zip entries are not supported.", details={"path": name})
                with zf.open(info) as fh:
                    data = fh.read(MAX_FILE_BYTES + 1)
                budget.add(name, len(data))
                files[name] = data
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, OSError, EOFError) as exc:
        raise ThemeManifestInvalid(f"The zip file cannot be read ({type(exc).__name__}).") from None
    return files


def _read_folder(root: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    budget = _Budget()
    stack = [root]
    while stack:
        folder = stack.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                rel = Path(entry.path).relative_to(root).as_posix()
                if entry.is_symlink():
                    raise _outside(rel, "is a symbolic link")
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                    continue
                if not entry.is_file(follow_symlinks=False):
                    raise _outside(rel, "is not a regular file")
                fd = os.open(entry.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
                with os.fdopen(fd, "rb") as fh:
                    data = fh.read(MAX_FILE_BYTES + 1)
                budget.add(rel, len(data))
                files[_check_name(rel)] = data
    return files


def _strip_top_folder(files: dict[str, bytes]) -> dict[str, bytes]:
    if MANIFEST in files:
        return files
    tops = {name.split("/", 1)[0] for name in files}
    if len(tops) == 1:
        top = tops.pop() + "/"
        if top + MANIFEST in files:
            return {name[len(top) :]: data for name, data in files.items() if name.startswith(top)}
    raise ThemeManifestInvalid(f"The package has no {MANIFEST} at its root.")


# ------------------------------------------------------------------------------------------ manifest
def parse_manifest(files: dict[str, bytes]) -> tuple[ThemeManifest, list[str]]:
    raw = files[MANIFEST]
    if len(raw) > MAX_MANIFEST_BYTES:
        raise ThemeManifestInvalid(f"{MANIFEST} is larger than {MAX_MANIFEST_BYTES} bytes.")
    try:
        data = yaml.safe_load(raw.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError, RecursionError) as exc:
        mark = getattr(exc, "problem_mark", None)
        details = {"line": mark.line + 1, "column": mark.column + 1} if mark else {}
        raise ThemeManifestInvalid(f"{MANIFEST} is not valid UTF-8 YAML.", details=details) from None
    if not isinstance(data, dict):
        raise ThemeManifestInvalid(f"{MANIFEST} must be a mapping of the manifest fields.")
    problems: list[str] = []
    for key, kind in _REQUIRED.items():
        value = data.get(key)
        if not isinstance(value, kind) or (isinstance(value, str) and not value.strip()):
            problems.append(f"{key}: required {kind.__name__}")
    for key, kind in _OPTIONAL.items():
        if data.get(key) is not None and not isinstance(data[key], kind):
            problems.append(f"{key}: must be a {kind.__name__}")
    for key in ("name", "author"):
        if isinstance(data.get(key), str) and len(data[key]) > 200:
            problems.append(f"{key}: at most 200 characters")
    if isinstance(data.get("description"), str) and len(data["description"]) > 2000:
        problems.append("description: at most 2000 characters")
    if isinstance(data.get("theme_id"), str) and not re.match(THEME_ID_PATTERN, data["theme_id"]):
        problems.append("theme_id: lowercase letters, digits, '.', '_' or '-', at most 64")
    for key in ("version", "min_app_version"):
        if isinstance(data.get(key), str) and not SEMVER.match(data[key]):
            problems.append(f"{key}: must be a semantic version (e.g. 1.2.0)")
    if problems:
        raise ThemeManifestInvalid(f"{MANIFEST} is invalid: {'; '.join(problems)}.", details={"errors": problems})
    warnings = [f"THEME_MANIFEST_UNKNOWN_KEY: {key!r} ignored" for key in data if key not in {*_REQUIRED, *_OPTIONAL}]
    manifest = ThemeManifest.model_validate({k: data.get(k) for k in (*_REQUIRED, *_OPTIONAL)})
    manifest.css_entry = _package_file(files, manifest.css_entry, "css_entry", ".css")
    if manifest.preview is not None:
        manifest.preview = _package_file(files, manifest.preview, "preview", None)
        if image_kind(files[manifest.preview]) is None:
            raise ThemeManifestInvalid(
                "The preview is not a PNG, JPEG, WebP or GIF image (checked by content).",
                details={"path": manifest.preview},
            )
    return manifest, warnings


def _package_file(files: dict[str, bytes], ref: str, key: str, suffix: str | None) -> str:
    name = _check_name(ref)
    if name not in files:
        raise ThemeManifestInvalid(f"{key} {ref!r} is not a file of the package.", details={"field": key})
    if suffix and not name.lower().endswith(suffix):
        raise ThemeManifestInvalid(f"{key} must be a {suffix} file.", details={"field": key})
    return name


def image_kind(data: bytes) -> str | None:
    for kind, magics in _IMAGE_MAGIC.items():
        if data.startswith(magics):
            return kind
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return None


# ------------------------------------------------------------------------------------------ resources
def check_resources(files: dict[str, bytes]) -> list[str]:
    warnings: list[str] = []
    for name, data in sorted(files.items()):
        ext = posixpath.splitext(name)[1].lower()
        if ext in _FORBIDDEN_EXT:
            raise ThemeCssUnsafe(f"A theme package cannot contain scripts or markup ({name}).", details={"path": name})
        if ext == ".css":
            warnings += check_css(name, data, files)
        elif ext in _EXT_KIND and image_kind(data) != _EXT_KIND[ext]:
            raise ThemeManifestInvalid(
                f"{name} is not the image its extension says (checked by content).", details={"path": name}
            )
        elif ext == ".svg":
            _check_svg(name, data)
    return warnings


def _check_svg(name: str, data: bytes) -> None:
    from sidecar.render.sanitize import UnsafeSvgError, sanitize_svg

    try:
        _, removed = sanitize_svg(data.decode("utf-8"))
    except (UnicodeDecodeError, UnsafeSvgError):
        raise ThemeCssUnsafe(f"{name} is not a well-formed SVG image.", details={"path": name}) from None
    if removed:
        raise ThemeCssUnsafe(f"{name} has unsafe SVG content: {'; '.join(removed)}.", details={"path": name})


def check_css(name: str, data: bytes, files: dict[str, bytes]) -> list[str]:
    import tinycss2

    if len(data) > MAX_CSS_BYTES:
        raise ThemeCssUnsafe(f"{name} is larger than {MAX_CSS_BYTES} bytes.", details={"path": name})
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ThemeCssUnsafe(f"{name} is not UTF-8.", details={"path": name}) from None
    checker = _CssChecker(name, files)
    checker.rules(tinycss2.parse_stylesheet(text, skip_comments=True, skip_whitespace=True))
    return checker.warnings


class _CssChecker:
    def __init__(self, name: str, files: dict[str, bytes]) -> None:
        self.name = name
        self.files = files
        self.base = posixpath.dirname(name)
        self.warnings: list[str] = []

    def fail(self, node: Any, why: str) -> ThemeCssUnsafe:
        line, column = getattr(node, "source_line", None), getattr(node, "source_column", None)
        return ThemeCssUnsafe(
            f"{self.name} line {line}: {why}.",
            details={"path": self.name, "line": line, "column": column, "reason": why},
        )

    def rules(self, nodes: list[Any]) -> None:
        import tinycss2

        for node in nodes:
            if node.type == "error":
                raise self.fail(node, f"CSS syntax error ({node.message})")
            if node.type == "at-rule":
                keyword = node.lower_at_keyword
                if keyword == "import":
                    raise self.fail(node, "@import is not allowed")
                if keyword not in {
                    "media",
                    "supports",
                    "font-face",
                    "keyframes",
                    "layer",
                    "page",
                    "charset",
                    "container",
                    "property",
                    "counter-style",
                    "-webkit-keyframes",
                }:
                    raise self.fail(node, f"@{keyword} is not allowed")
            self.tokens(getattr(node, "prelude", None) or [])
            content = getattr(node, "content", None)
            if content:
                self.rules(tinycss2.parse_blocks_contents(content, skip_comments=True, skip_whitespace=True))
            if node.type == "declaration":
                if node.lower_name in ("behavior", "-moz-binding", "-ms-behavior"):
                    raise self.fail(node, f"the {node.lower_name} property is not allowed")
                self.tokens(node.value)

    def tokens(self, tokens: list[Any]) -> None:
        for token in tokens:
            kind = token.type
            if kind == "error":  # e.g. a bad url(…) token
                raise self.fail(token, f"CSS syntax error ({token.message})")
            if kind == "url":
                self.url(token, token.value)
            elif kind == "function":
                if token.lower_name == "expression":
                    raise self.fail(token, "expression() is not allowed")
                if token.lower_name in _URL_STRING_FUNCTIONS:
                    for arg in token.arguments:
                        if arg.type == "string":
                            self.url(token, arg.value)
                self.tokens(token.arguments)
            elif kind in ("ident", "string") and _SCRIPTY.search(token.value):
                raise self.fail(token, "script in CSS is not allowed")
            elif kind in ("() block", "[] block", "{} block"):
                self.tokens(token.content)

    def url(self, node: Any, url: str) -> None:
        url = url.strip()
        if not url or url.startswith("#"):
            return
        if url.lower().startswith("data:"):
            if not _SAFE_DATA.match(url):
                raise self.fail(node, "only image and font data: URLs are allowed")
            return
        if _SCHEME.match(url) or url.startswith("//"):
            raise self.fail(node, f"remote or script URL {url[:100]!r} is not allowed")
        # the browser's URL parser reads %2e%2e as ".." (and %5c as "\\"): check the decoded path
        path = unquote(url.split("?", 1)[0].split("#", 1)[0])
        if path.startswith("/") or "\\" in path:
            raise _outside(url, "is an absolute path")
        target = posixpath.normpath(posixpath.join(self.base, path))
        if target == ".." or target.startswith("../"):
            raise _outside(url, "points outside the package")
        if target not in self.files:
            self.warnings.append(f"THEME_RESOURCE_MISSING: {self.name} refers to {url[:100]!r}, not in the package")


def inspect_files(files: dict[str, bytes]) -> Package:
    manifest, warnings = parse_manifest(files)
    warnings += check_resources(files)
    return Package(files, manifest, warnings)
