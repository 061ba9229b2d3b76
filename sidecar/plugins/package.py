"""Reading a plugin package safely: a folder or a ``.zip`` copied into a staging folder, then its manifest.

Refused: zip members with absolute paths, ``..`` or drive letters (zip-slip), symlinks (in a zip: any; in a
folder: any pointing outside the package), special files, more than :data:`MAX_FILES` files or
:data:`MAX_BYTES` bytes. Nothing is written outside the staging folder.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import ValidationError

from sidecar.core.errors import BadRequestError, NotFoundError, PayloadTooLargeError

from .models import PluginManifest

MANIFEST = "plugin.json"
MAX_FILES = 20_000
MAX_BYTES = 512 * 1024 * 1024
MAX_MANIFEST_BYTES = 1024 * 1024


def invalid(message: str, **details: Any) -> BadRequestError:
    return BadRequestError(message, code="PLUGIN_PACKAGE_INVALID", details=details)


def stage(source: Path, staging: Path) -> Path:
    """Copy the package at ``source`` into the new folder ``staging``; the package root inside it."""
    if source.is_symlink():
        raise invalid("the package path is a symlink", path=str(source))
    if source.is_dir():
        _copy_folder(source, staging)
    elif source.is_file() and zipfile.is_zipfile(source):
        _extract_zip(source, staging)
    elif source.exists():
        raise invalid("the package must be a folder or a .zip file", path=str(source))
    else:
        raise NotFoundError(
            "the package path does not exist", code="PLUGIN_PACKAGE_NOT_FOUND", details={"path": str(source)}
        )
    if (staging / MANIFEST).is_file():
        return staging
    entries = list(staging.iterdir())
    if len(entries) == 1 and entries[0].is_dir() and (entries[0] / MANIFEST).is_file():
        return entries[0]  # a zip of the plugin folder itself
    raise invalid(f"no {MANIFEST} at the package root")


def _copy_folder(source: Path, staging: Path) -> None:
    root = source.resolve()
    files = 0
    total = 0
    staging.mkdir(parents=True)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        rel = here.relative_to(root)
        for name in list(dirnames):
            path = here / name
            if path.is_symlink():
                raise invalid("the package contains a symlinked folder", path=str(rel / name))
            (staging / rel / name).mkdir()
        for name in filenames:
            path = here / name
            if path.is_symlink():
                target = path.resolve()
                if not target.is_relative_to(root):
                    raise invalid("the package contains a symlink that points outside it", path=str(rel / name))
            info = path.stat()
            if not stat.S_ISREG(info.st_mode):
                raise invalid("the package contains a special file", path=str(rel / name))
            files += 1
            total += info.st_size
            _check_limits(files, total)
            shutil.copy2(path, staging / rel / name, follow_symlinks=True)


def _extract_zip(source: Path, staging: Path) -> None:
    staging.mkdir(parents=True)
    root = staging.resolve()
    with zipfile.ZipFile(source) as archive:
        members = archive.infolist()
        _check_limits(len(members), sum(m.file_size for m in members))
        for member in members:
            name = member.filename
            pure = PurePosixPath(name.replace("\\", "/"))
            if pure.is_absolute() or ".." in pure.parts or (pure.parts and ":" in pure.parts[0]):
                raise invalid("the archive has an entry outside the package (zip-slip)", entry=name[:300])
            mode = member.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise invalid("the archive contains a symlink", entry=name[:300])
            if stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):  # 0: no type recorded (a plain file)
                raise invalid("the archive contains a special file", entry=name[:300])
            target = (root / pure).resolve()
            if not target.is_relative_to(root):
                raise invalid("the archive has an entry outside the package (zip-slip)", entry=name[:300])
            try:
                if member.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                dst_file = open(target, "xb")
            except (FileExistsError, IsADirectoryError, NotADirectoryError):
                raise invalid("the archive has a duplicate or conflicting entry", entry=name[:300]) from None
            written = 0
            with archive.open(member) as src, dst_file as dst:
                while chunk := src.read(1 << 20):
                    written += len(chunk)
                    if written > member.file_size or written > MAX_BYTES:
                        raise invalid("an archive entry is larger than it declares", entry=name[:300])
                    dst.write(chunk)
            if mode & 0o111:
                target.chmod(0o755)


def _check_limits(files: int, total: int) -> None:
    if files > MAX_FILES:
        raise PayloadTooLargeError(
            f"the package has more than {MAX_FILES} files", code="PLUGIN_PACKAGE_TOO_LARGE", details={}
        )
    if total > MAX_BYTES:
        raise PayloadTooLargeError(
            f"the package is larger than {MAX_BYTES} bytes", code="PLUGIN_PACKAGE_TOO_LARGE", details={}
        )


def read_manifest(root: Path) -> PluginManifest:
    """``plugin.json`` validated; unknown keys and bad values refused with their paths."""
    path = root / MANIFEST
    if path.stat().st_size > MAX_MANIFEST_BYTES:
        raise invalid(f"{MANIFEST} is larger than {MAX_MANIFEST_BYTES} bytes")
    try:
        raw = json.loads(path.read_text("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadRequestError(
            f"{MANIFEST} is not valid JSON: {exc}", code="PLUGIN_MANIFEST_INVALID", details={"errors": []}
        ) from None
    return parse_manifest(raw)


def parse_manifest(raw: Any) -> PluginManifest:
    try:
        return PluginManifest.model_validate(raw)
    except ValidationError as exc:
        errors = [
            {"path": "/".join(str(p) for p in e["loc"]), "message": e["msg"]}
            for e in exc.errors(include_url=False, include_input=False, include_context=False)
        ]
        in_settings = errors and all(e["path"].startswith("contributes/settings") for e in errors)
        code = "PLUGIN_SETTINGS_SCHEMA_INVALID" if in_settings else "PLUGIN_MANIFEST_INVALID"
        first = errors[0] if errors else {"path": "", "message": "invalid"}
        raise BadRequestError(
            f"{MANIFEST} is invalid at {first['path'] or '(root)'}: {first['message']}",
            code=code,
            details={"errors": errors[:50]},
        ) from None
