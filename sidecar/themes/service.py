"""ThemePackageService (phase-2 §11.2) over ``<data-dir>/themes/``.

``inspect(path)`` reads and checks a host-chosen package and stages its files under ``themes/.staging/<id>/``;
the returned ``package_id`` is the only handle ``install`` takes (never a path). ``install`` moves the staged
folder to ``themes/<theme_id>/`` with one rename. ``state.json`` (written atomically) holds the installed
themes and the one enabled theme; the built-ins ``light`` and ``dark`` are always there and protected.
Staged packages are dropped after :data:`STAGING_TTL_S` and at start-up.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from pathlib import Path
from typing import Any

import anyio

from sidecar.core.common import now_iso

from .builtin import BUILTIN, DEFAULT_THEME
from .errors import (
    ThemeAlreadyInstalled,
    ThemeBuiltinProtected,
    ThemeNotFound,
    ThemePackageIncompatible,
    ThemePackageNotFound,
    ThemeStateCorrupt,
)
from .inspect import SEMVER, image_kind, inspect_files, read_package
from .models import InstalledTheme, ThemeManifest, ThemePackageInspection

STAGING_TTL_S = 3600.0
PREVIEW_SCHEME = "app-theme-preview://"


def semver_key(version: str) -> tuple[Any, ...]:
    match = SEMVER.match(version)
    if not match:
        return (0, 0, 0, 0, ())
    major, minor, patch, pre = match.groups()
    pre_key = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split(".")) if pre else ()
    return (int(major), int(minor), int(patch), 0 if pre else 1, pre_key)


class ThemeService:
    def __init__(self, data_dir: Path, app_version: str) -> None:
        self.root = data_dir / "themes"
        self.staging = self.root / ".staging"
        if not app_version:
            from sidecar import __version__ as app_version
        self.app_version = app_version
        self._staged: dict[str, tuple[float, ThemePackageInspection]] = {}
        self._lock = anyio.Lock()

    async def start(self) -> None:
        await anyio.to_thread.run_sync(self._clear_leftovers)

    def _clear_leftovers(self) -> None:
        """What a crash (kill -9) can leave: staged packages, a state file's temp copy, and a theme folder moved in
        before ``state.json`` named it (it would be visible on disk though no theme is installed from it). A corrupt
        ``state.json`` removes nothing: the folders it names cannot be told apart."""
        shutil.rmtree(self.staging, ignore_errors=True)
        try:
            installed = self._load()["installed"]
        except ThemeStateCorrupt:
            return
        for entry in self.root.iterdir() if self.root.is_dir() else []:
            if entry.name.startswith(".state.") and entry.name.endswith(".tmp"):
                entry.unlink(missing_ok=True)
            elif entry.is_dir() and not entry.name.startswith(".") and entry.name not in installed:
                shutil.rmtree(entry, ignore_errors=True)

    # ---------------------------------------------------------------------------------------- inspect
    async def inspect(self, path: str) -> ThemePackageInspection:
        package = await anyio.to_thread.run_sync(read_package, path)
        checked = await anyio.to_thread.run_sync(inspect_files, package)
        manifest = checked.manifest
        warnings = list(checked.warnings)
        compatible = semver_key(manifest.min_app_version) <= semver_key(self.app_version)
        if not compatible:
            warnings.append(
                f"THEME_PACKAGE_INCOMPATIBLE: needs app {manifest.min_app_version}, this is {self.app_version}"
            )
        if manifest.theme_id in BUILTIN:
            warnings.append(f"THEME_BUILTIN_PROTECTED: {manifest.theme_id!r} is a built-in theme id")
        package_id = "theme_package_" + secrets.token_hex(8)
        await anyio.to_thread.run_sync(self._stage, package_id, checked.files)
        inspection = ThemePackageInspection(
            package_id=package_id,
            manifest=manifest,
            preview_url=PREVIEW_SCHEME + package_id if manifest.preview else None,
            warnings=warnings,
            compatible=compatible,
        )
        self._expire()
        self._staged[package_id] = (time.monotonic(), inspection)
        return inspection

    def _stage(self, package_id: str, files: dict[str, bytes]) -> None:
        target = self.staging / package_id
        for name, data in files.items():
            path = target / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

    def _expire(self) -> None:
        now = time.monotonic()
        for package_id, (at, _) in list(self._staged.items()):
            if now - at > STAGING_TTL_S:
                del self._staged[package_id]
                shutil.rmtree(self.staging / package_id, ignore_errors=True)

    async def preview(self, package_id: str) -> tuple[bytes, str]:
        """The checked preview image of a staged package and its MIME type (what ``app-theme-preview://`` serves
        to the host's isolated preview container)."""
        entry = self._staged.get(package_id)
        if entry is None or entry[1].manifest.preview is None:
            raise ThemePackageNotFound(
                "No inspected package with a preview has this package_id.", details={"package_id": package_id}
            )
        data = await anyio.to_thread.run_sync((self.staging / package_id / entry[1].manifest.preview).read_bytes)
        return data, "image/" + (image_kind(data) or "png")

    # ---------------------------------------------------------------------------------------- install
    async def install(self, package_id: str) -> InstalledTheme:
        self._expire()
        entry = self._staged.get(package_id)
        if entry is None:
            raise ThemePackageNotFound(
                "No inspected package has this package_id (inspect it first; handles expire).",
                details={"package_id": package_id},
            )
        inspection = entry[1]
        manifest = inspection.manifest
        if manifest.theme_id in BUILTIN:
            raise ThemeBuiltinProtected(f"{manifest.theme_id!r} is a built-in theme and cannot be replaced.")
        if not inspection.compatible:
            raise ThemePackageIncompatible(
                f"The theme needs app version {manifest.min_app_version} or newer (this is {self.app_version}).",
                details={"min_app_version": manifest.min_app_version, "app_version": self.app_version},
            )
        async with self._lock:
            state = await anyio.to_thread.run_sync(self._load)
            if manifest.theme_id in state["installed"]:
                raise ThemeAlreadyInstalled(
                    f"The theme {manifest.theme_id!r} is already installed (uninstall it first).",
                    details={"theme_id": manifest.theme_id},
                )
            await anyio.to_thread.run_sync(self._move_in, package_id, manifest.theme_id)
            state["installed"][manifest.theme_id] = {"manifest": manifest.model_dump(), "installed_at": now_iso()}
            await anyio.to_thread.run_sync(self._save, state)
            del self._staged[package_id]
            return self._view(manifest.theme_id, state)

    def _move_in(self, package_id: str, theme_id: str) -> None:
        target = self.root / theme_id
        if target.exists():  # left by an install that crashed before state.json named it
            shutil.rmtree(target)
        os.replace(self.staging / package_id, target)

    # ----------------------------------------------------------------------------------- list / enable
    async def list(self) -> list[InstalledTheme]:
        state = await anyio.to_thread.run_sync(self._load)
        return [self._view(tid, state) for tid in [*BUILTIN, *sorted(state["installed"])]]

    async def get(self, theme_id: str) -> InstalledTheme:
        state = await anyio.to_thread.run_sync(self._load)
        self._require(theme_id, state)
        return self._view(theme_id, state)

    async def enable(self, theme_id: str) -> InstalledTheme:
        async with self._lock:
            state = await anyio.to_thread.run_sync(self._load)
            self._require(theme_id, state)
            state["enabled"] = theme_id
            await anyio.to_thread.run_sync(self._save, state)
            return self._view(theme_id, state)

    async def disable(self, theme_id: str) -> None:
        """Turn a theme off: the default ``light`` is enabled instead (it cannot itself be disabled)."""
        async with self._lock:
            state = await anyio.to_thread.run_sync(self._load)
            self._require(theme_id, state)
            if theme_id == DEFAULT_THEME:
                raise ThemeBuiltinProtected("The default theme cannot be disabled; enable another theme instead.")
            if state["enabled"] == theme_id:
                state["enabled"] = DEFAULT_THEME
                await anyio.to_thread.run_sync(self._save, state)

    async def uninstall(self, theme_id: str) -> None:
        async with self._lock:
            state = await anyio.to_thread.run_sync(self._load)
            if theme_id in BUILTIN:
                raise ThemeBuiltinProtected(f"{theme_id!r} is a built-in theme and cannot be uninstalled.")
            self._require(theme_id, state)
            del state["installed"][theme_id]
            if state["enabled"] == theme_id:
                state["enabled"] = DEFAULT_THEME
            await anyio.to_thread.run_sync(self._save, state)  # state first: a crash leaves only a stray folder
            await anyio.to_thread.run_sync(shutil.rmtree, self.root / theme_id, True)

    async def css(self, theme_id: str | None = None) -> str:
        """The CSS of a theme (default: the enabled one), for exporters; relative url()s stay package-relative."""
        state = await anyio.to_thread.run_sync(self._load)
        theme_id = theme_id or state["enabled"]
        self._require(theme_id, state)
        if theme_id in BUILTIN:
            return BUILTIN[theme_id][1]
        entry = state["installed"][theme_id]["manifest"]["css_entry"]
        return await anyio.to_thread.run_sync((self.root / theme_id / entry).read_text, "utf-8")

    # ------------------------------------------------------------------------------------------ state
    @property
    def _state_path(self) -> Path:
        return self.root / "state.json"

    def _load(self) -> dict[str, Any]:
        try:
            state = json.loads(self._state_path.read_text("utf-8"))
        except FileNotFoundError:
            state = {}
        except (OSError, ValueError) as exc:
            raise _corrupt(f"cannot be read: {type(exc).__name__}") from None
        if not isinstance(state, dict) or not isinstance(state.get("installed", {}), dict):
            raise _corrupt("is not a state object")
        if any(
            not isinstance(v, dict) or not isinstance(v.get("manifest"), dict)
            for v in state.get("installed", {}).values()
        ):
            raise _corrupt("has an installed theme without its manifest")
        state.setdefault("installed", {})
        state.setdefault("enabled", DEFAULT_THEME)
        if state["enabled"] not in BUILTIN and state["enabled"] not in state["installed"]:
            state["enabled"] = DEFAULT_THEME
        return state

    def _save(self, state: dict[str, Any]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self._state_path.with_name(f".state.{secrets.token_hex(4)}.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(state, fh, ensure_ascii=False, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self._state_path)

    def _require(self, theme_id: str, state: dict[str, Any]) -> None:
        if theme_id not in BUILTIN and theme_id not in state["installed"]:
            raise ThemeNotFound(f"No installed theme {theme_id[:100]!r}.", details={"theme_id": theme_id[:100]})

    def _view(self, theme_id: str, state: dict[str, Any]) -> InstalledTheme:
        if theme_id in BUILTIN:
            manifest, installed_at, builtin = BUILTIN[theme_id][0], None, True
        else:
            entry = state["installed"][theme_id]
            manifest, installed_at, builtin = (
                ThemeManifest.model_validate(entry["manifest"]),
                entry["installed_at"],
                False,
            )
        return InstalledTheme(
            theme_id=theme_id,
            name=manifest.name,
            version=manifest.version,
            author=manifest.author,
            description=manifest.description,
            is_dark=manifest.is_dark,
            builtin=builtin,
            enabled=state["enabled"] == theme_id,
            installed_at=installed_at,
        )


def _corrupt(why: str) -> ThemeStateCorrupt:
    return ThemeStateCorrupt(
        f"The themes state file {why}; it is left as it is (repair or remove themes/state.json).",
        details={"file": "themes/state.json", "reason": why},
    )
