"""Process settings from argv and the environment (argv wins). No heavy imports here."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024
DATA_SUBDIRS = ("lancedb", "attachments", "exports", "plugins", "themes", "models", "datasets")


def default_data_dir() -> Path:
    """The platform's per-user data directory for Metona."""
    home = Path.home()
    if sys.platform == "win32":
        base = Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming")
        return base / "Metona"
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "Metona"
    return Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share") / "metona"


@dataclass(frozen=True, slots=True)
class Settings:
    data_dir: Path
    log_level: str = "INFO"
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    dev_methods: bool = False
    parent_pid: int | None = None
    shutdown_grace_s: float = 2.0
    chromium_path: str | None = None
    whisper_model_dir: Path | None = None
    diarization_model_dir: Path | None = None
    development: bool = False
    """Development mode (``--development`` / METONA_DEVELOPMENT=1): e.g. ``plugins/install`` takes a package_path."""
    secret_key_file: Path | None = None
    """Where the master key that encrypts secrets at rest lives when the host does not pass METONA_SECRET_KEY;
    default :func:`default_secret_key_file` (outside the data directory)."""

    app_version: str = ""
    """The desktop app's version, for theme ``min_app_version`` (env METONA_APP_VERSION; default ours)."""
    document_page_timeout_s: float = 60.0
    """A document import's limit per page (env METONA_DOCUMENT_PAGE_TIMEOUT_S): past it the worker is killed."""
    document_import_timeout_s: float = 1800.0
    """A document import's limit in all (env METONA_DOCUMENT_IMPORT_TIMEOUT_S)."""

    @property
    def models_dir(self) -> Path:
        return self.data_dir / "models"


def prepare_data_dir(settings: Settings) -> None:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    for sub in DATA_SUBDIRS:
        (settings.data_dir / sub).mkdir(exist_ok=True)


def default_secret_key_file() -> Path:
    """The per-user config directory (not the data directory: a copied data dir does not carry the key)."""
    home = Path.home()
    if sys.platform == "win32":
        base = Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming")
        return base / "Metona" / "config" / "sidecar-master.key"
    if sys.platform == "darwin":
        return home / "Library" / "Preferences" / "Metona" / "sidecar-master.key"
    return Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config") / "metona" / "sidecar-master.key"


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value).expanduser() if value else None


def _defaults() -> dict[str, Any]:
    """Each option's value when argv does not give it (the environment's, else the built-in one)."""
    return {
        "data_dir": _env_path("METONA_DATA_DIR"),
        "log_level": os.environ.get("METONA_LOG_LEVEL", "INFO"),
        "max_line_bytes": int(os.environ.get("METONA_MAX_LINE_BYTES", DEFAULT_MAX_LINE_BYTES)),
        "dev_methods": _env_flag("METONA_DEV_METHODS"),
        "parent_pid": int(os.environ["METONA_PARENT_PID"]) if os.environ.get("METONA_PARENT_PID") else None,
        "secret_key_file": _env_path("METONA_SECRET_KEY_FILE"),
        "development": _env_flag("METONA_DEVELOPMENT"),
        "version": False,
    }


# option → (key, how its value is read; None for a flag)
_OPTIONS: dict[str, tuple[str, Callable[[str], Any] | None]] = {
    "--data-dir": ("data_dir", Path),
    "--log-level": ("log_level", str),
    "--max-line-bytes": ("max_line_bytes", int),
    "--dev-methods": ("dev_methods", None),
    "--parent-pid": ("parent_pid", int),
    "--secret-key-file": ("secret_key_file", Path),
    "--development": ("development", None),
}


def _plain_args(args: list[str]) -> dict[str, Any] | None:
    """The options of a plain command line — known options spelt out in full, each value after its option or its
    ``=`` — read without argparse (whose import and parser cost a noticeable part of the start, issue 22); None
    for anything else (help, version, abbreviations, unknown options, odd or bad values): argparse reads those."""
    values = _defaults()
    i = 0
    while i < len(args):
        name, eq, value = args[i].partition("=")
        if name not in _OPTIONS:
            return None
        key, read = _OPTIONS[name]
        if read is None:
            if eq:
                return None
            values[key] = True
        else:
            if not eq:
                if i + 1 >= len(args) or args[i + 1].startswith("-"):
                    return None
                i += 1
                value = args[i]
            try:
                values[key] = read(value)
            except ValueError:
                return None
        i += 1
    if values["max_line_bytes"] < 1024:
        return None
    return values


def _argparse_args(args: list[str]) -> dict[str, Any]:
    defaults = _defaults()
    import argparse

    parser = argparse.ArgumentParser(
        prog="metona-sidecar",
        description="Metona sidecar: newline-delimited JSON-RPC 2.0 on stdin/stdout; logs on stderr.",
    )
    parser.add_argument(
        "--data-dir", type=Path, default=defaults["data_dir"], help="data directory (env METONA_DATA_DIR)"
    )
    parser.add_argument("--log-level", default=defaults["log_level"], help="DEBUG, INFO, WARNING, ERROR")
    parser.add_argument(
        "--max-line-bytes",
        type=int,
        default=defaults["max_line_bytes"],
        help="longest accepted input line (env METONA_MAX_LINE_BYTES)",
    )
    parser.add_argument(
        "--dev-methods",
        action="store_true",
        default=defaults["dev_methods"],
        help="also serve the test/conformance methods (env METONA_DEV_METHODS=1)",
    )
    parser.add_argument(
        "--parent-pid",
        type=int,
        default=defaults["parent_pid"],
        help="exit when this process dies (default: when the parent process changes)",
    )
    parser.add_argument(
        "--secret-key-file",
        type=Path,
        default=defaults["secret_key_file"],
        help="master key file for secrets at rest, when METONA_SECRET_KEY is not given (env METONA_SECRET_KEY_FILE)",
    )
    parser.add_argument(
        "--development",
        action="store_true",
        default=defaults["development"],
        help="development mode: plugins install from a local path (env METONA_DEVELOPMENT=1)",
    )
    parser.add_argument("--version", action="store_true", help="print the version to stderr and exit")
    ns = parser.parse_args(args)
    if ns.max_line_bytes < 1024:
        parser.error("--max-line-bytes must be at least 1024")
    return vars(ns)


def parse_args(argv: list[str] | None = None) -> Settings:
    args = sys.argv[1:] if argv is None else argv
    ns = _plain_args(args)
    if ns is None:
        ns = _argparse_args(args)
    if ns["version"]:
        from .. import __version__

        sys.stderr.write(f"metona-sidecar {__version__}\n")
        raise SystemExit(0)
    return Settings(
        data_dir=(ns["data_dir"] or default_data_dir()).expanduser().resolve(),
        log_level=str(ns["log_level"]).upper(),
        max_line_bytes=ns["max_line_bytes"],
        dev_methods=bool(ns["dev_methods"]),
        development=bool(ns["development"]),
        parent_pid=ns["parent_pid"],
        chromium_path=os.environ.get("METONA_CHROMIUM_PATH") or None,
        whisper_model_dir=_env_path("METONA_WHISPER_MODEL_DIR"),
        diarization_model_dir=_env_path("METONA_DIARIZATION_MODEL_DIR"),
        secret_key_file=ns["secret_key_file"].expanduser().resolve() if ns["secret_key_file"] else None,
        app_version=os.environ.get("METONA_APP_VERSION") or _own_version(),
        document_page_timeout_s=_env_seconds("METONA_DOCUMENT_PAGE_TIMEOUT_S", 60.0),
        document_import_timeout_s=_env_seconds("METONA_DOCUMENT_IMPORT_TIMEOUT_S", 1800.0),
    )


def _env_seconds(name: str, default: float) -> float:
    """A positive number of seconds from the environment; the default when unset or not one."""
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if 0 < value < 1e7 else default


def _own_version() -> str:
    from .. import __version__

    return __version__
