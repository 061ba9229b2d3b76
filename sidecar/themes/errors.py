"""Theme error codes (phase-2 §11.4) with their HTTP status."""

from __future__ import annotations

from sidecar.core.errors import BadRequestError, ConflictError, ForbiddenError, NotFoundError, SidecarError


class ThemeStateCorrupt(SidecarError):
    """``themes/state.json`` exists but cannot be read as the state (issue 21): every theme call fails with this
    until it is repaired or removed by hand; it is never read as empty, which the next save would make final."""

    status = 500
    default_code = "THEME_STATE_CORRUPT"


class ThemePackageNotFound(NotFoundError):
    default_code = "THEME_PACKAGE_NOT_FOUND"


class ThemeManifestInvalid(BadRequestError):
    default_code = "THEME_MANIFEST_INVALID"


class ThemePackageIncompatible(ConflictError):
    default_code = "THEME_PACKAGE_INCOMPATIBLE"


class ThemeResourceOutsidePackage(BadRequestError):
    default_code = "THEME_RESOURCE_OUTSIDE_PACKAGE"


class ThemeCssUnsafe(BadRequestError):
    default_code = "THEME_CSS_UNSAFE"


class ThemeAlreadyInstalled(ConflictError):
    default_code = "THEME_ALREADY_INSTALLED"


class ThemeNotFound(NotFoundError):
    default_code = "THEME_NOT_FOUND"


class ThemeBuiltinProtected(ForbiddenError):
    default_code = "THEME_BUILTIN_PROTECTED"
