"""Theme package types (phase-2 §11): the manifest, the inspection, an installed theme. snake_case."""

from __future__ import annotations

from pydantic import Field

from sidecar.core.common import Params, Phase2Model

THEME_ID_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"


class ThemeManifest(Phase2Model):
    theme_id: str
    name: str
    version: str
    author: str
    description: str | None = None
    min_app_version: str
    is_dark: bool
    css_entry: str
    preview: str | None = None


class ThemePackageInspection(Phase2Model):
    package_id: str
    manifest: ThemeManifest
    preview_url: str | None
    warnings: list[str] = Field(default_factory=list)
    compatible: bool


class InstalledTheme(Phase2Model):
    """Not spelled out by the seed: the manifest's fields plus where it came from and whether it is on."""

    theme_id: str
    name: str
    version: str
    author: str
    description: str | None = None
    is_dark: bool
    builtin: bool
    enabled: bool
    installed_at: str | None = None


class ThemeList(Phase2Model):
    items: list[InstalledTheme]


class InspectParams(Params):
    path: str = Field(min_length=1, max_length=4096)
    """A host path chosen by the user in a file picker (a .zip or a folder); ARCHITECTURE.md §6 host trust."""


class PackageIdParams(Params):
    package_id: str = Field(min_length=1, max_length=100)


class ThemeIdParams(Params):
    theme_id: str = Field(min_length=1, max_length=100)


class ThemeOperationResult(Phase2Model):
    theme_id: str
    ok: bool = True


class ThemePreview(Phase2Model):
    package_id: str
    mime_type: str
    data_base64: str
