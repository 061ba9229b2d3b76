"""Installed packages found without importing them (stdlib only: used by workers and at start-up)."""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import sys
from pathlib import Path


def package_dir(module: str) -> Path | None:
    """The folder of an installed top-level package, without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


@functools.cache
def installed_versions() -> dict[str, str]:
    """Distribution versions from the ``*.dist-info`` folder names on sys.path.

    A directory listing, not ``importlib.metadata`` (whose import alone costs ~17 ms of start-up).
    """
    versions: dict[str, str] = {}
    for entry in sys.path:
        try:  # names, not Path objects: a site-packages folder holds hundreds of entries (issue 22: start time)
            names = [name for name in os.listdir(entry or ".") if name.endswith(".dist-info")]
        except OSError:
            continue
        for name in names:
            stem = name[: -len(".dist-info")]
            dist, _, version = stem.rpartition("-")
            if dist:
                versions.setdefault(normalise(dist), version)
    return versions
