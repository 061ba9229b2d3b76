"""Process settings from argv and the environment (argv wins). No heavy imports here."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024


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

    @property
    def models_dir(self) -> Path:
        return self.data_dir / "models"


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


def parse_args(argv: list[str] | None = None) -> Settings:
    parser = argparse.ArgumentParser(
        prog="metona-sidecar",
        description="Metona sidecar: newline-delimited JSON-RPC 2.0 on stdin/stdout; logs on stderr.",
    )
    parser.add_argument(
        "--data-dir", type=Path, default=_env_path("METONA_DATA_DIR"), help="data directory (env METONA_DATA_DIR)"
    )
    parser.add_argument(
        "--log-level", default=os.environ.get("METONA_LOG_LEVEL", "INFO"), help="DEBUG, INFO, WARNING, ERROR"
    )
    parser.add_argument(
        "--max-line-bytes",
        type=int,
        default=int(os.environ.get("METONA_MAX_LINE_BYTES", DEFAULT_MAX_LINE_BYTES)),
        help="longest accepted input line (env METONA_MAX_LINE_BYTES)",
    )
    parser.add_argument(
        "--dev-methods",
        action="store_true",
        default=_env_flag("METONA_DEV_METHODS"),
        help="also serve the test/conformance methods (env METONA_DEV_METHODS=1)",
    )
    parser.add_argument(
        "--parent-pid",
        type=int,
        default=int(os.environ["METONA_PARENT_PID"]) if os.environ.get("METONA_PARENT_PID") else None,
        help="exit when this process dies (default: when the parent process changes)",
    )
    parser.add_argument(
        "--secret-key-file",
        type=Path,
        default=_env_path("METONA_SECRET_KEY_FILE"),
        help="master key file for secrets at rest, when METONA_SECRET_KEY is not given (env METONA_SECRET_KEY_FILE)",
    )
    parser.add_argument(
        "--development",
        action="store_true",
        default=_env_flag("METONA_DEVELOPMENT"),
        help="development mode: plugins install from a local path (env METONA_DEVELOPMENT=1)",
    )
    parser.add_argument("--version", action="store_true", help="print the version to stderr and exit")
    ns = parser.parse_args(argv)
    if ns.version:
        from .. import __version__

        sys.stderr.write(f"metona-sidecar {__version__}\n")
        raise SystemExit(0)
    if ns.max_line_bytes < 1024:
        parser.error("--max-line-bytes must be at least 1024")
    return Settings(
        data_dir=(ns.data_dir or default_data_dir()).expanduser().resolve(),
        log_level=str(ns.log_level).upper(),
        max_line_bytes=ns.max_line_bytes,
        dev_methods=bool(ns.dev_methods),
        development=bool(ns.development),
        parent_pid=ns.parent_pid,
        chromium_path=os.environ.get("METONA_CHROMIUM_PATH") or None,
        whisper_model_dir=_env_path("METONA_WHISPER_MODEL_DIR"),
        diarization_model_dir=_env_path("METONA_DIARIZATION_MODEL_DIR"),
        secret_key_file=ns.secret_key_file.expanduser().resolve() if ns.secret_key_file else None,
        app_version=os.environ.get("METONA_APP_VERSION") or _own_version(),
    )


def _own_version() -> str:
    from .. import __version__

    return __version__
