"""``themes/inspect|install|list|enable|disable|uninstall`` (phase-2 §11.2)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sidecar.core.common import EmptyParams
from sidecar.ipc.router import Method

from .models import (
    InspectParams,
    InstalledTheme,
    PackageIdParams,
    ThemeIdParams,
    ThemeList,
    ThemeOperationResult,
    ThemePackageInspection,
    ThemePreview,
)

if TYPE_CHECKING:
    from sidecar.ipc.context import RequestContext

    from .service import ThemeService


def methods(themes: ThemeService) -> list[Method[Any, Any]]:
    async def inspect(ctx: RequestContext, p: InspectParams) -> ThemePackageInspection:
        return await themes.inspect(p.path)

    async def preview(ctx: RequestContext, p: PackageIdParams) -> ThemePreview:
        import base64

        data, mime = await themes.preview(p.package_id)
        return ThemePreview(package_id=p.package_id, mime_type=mime, data_base64=base64.b64encode(data).decode())

    async def install(ctx: RequestContext, p: PackageIdParams) -> InstalledTheme:
        return await themes.install(p.package_id)

    async def list_(ctx: RequestContext, p: EmptyParams) -> ThemeList:
        return ThemeList(items=await themes.list())

    async def enable(ctx: RequestContext, p: ThemeIdParams) -> InstalledTheme:
        return await themes.enable(p.theme_id)

    async def disable(ctx: RequestContext, p: ThemeIdParams) -> ThemeOperationResult:
        await themes.disable(p.theme_id)
        return ThemeOperationResult(theme_id=p.theme_id)

    async def uninstall(ctx: RequestContext, p: ThemeIdParams) -> ThemeOperationResult:
        await themes.uninstall(p.theme_id)
        return ThemeOperationResult(theme_id=p.theme_id)

    return [
        Method(
            "themes/inspect",
            InspectParams,
            ThemePackageInspection,
            inspect,
            summary="Check a host-chosen theme package (.zip or folder) → inspection with a package_id handle.",
        ),
        Method(
            "themes/install",
            PackageIdParams,
            InstalledTheme,
            install,
            summary="Install an inspected package by its package_id (never a path).",
        ),
        Method(
            "themes/preview",
            PackageIdParams,
            ThemePreview,
            preview,
            summary="The checked preview image of an inspected package (what app-theme-preview:// serves).",
        ),
        Method("themes/list", EmptyParams, ThemeList, list_, summary="Built-in and installed themes."),
        Method(
            "themes/enable",
            ThemeIdParams,
            InstalledTheme,
            enable,
            summary="Make this the one enabled theme (persisted).",
        ),
        Method(
            "themes/disable",
            ThemeIdParams,
            ThemeOperationResult,
            disable,
            summary="Turn a theme off (the default light theme is enabled instead).",
        ),
        Method(
            "themes/uninstall",
            ThemeIdParams,
            ThemeOperationResult,
            uninstall,
            summary="Remove an installed theme (built-ins are protected).",
        ),
    ]
