"""The build id: what ties the engines folder to the sidecar binary of the same build.

    python build/build_id.py        # prints e.g. 0.1.0+3f2a9c0d1b7e4a55

The version (pyproject.toml) plus a hash of every file of the ``sidecar`` package (paths and bytes, in path
order; caches left out). The engines carry their own copy of the worker code, so the binary refuses engines whose
``engines.json`` names another id (sidecar/workers/engines.py). build/build.sh computes it once per build and hands
it to both: the sidecar spec bundles it as ``metona-build-id``, build/engines_models.py writes it into engines.json.
"""

from __future__ import annotations

import hashlib
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def compute(root: Path = ROOT) -> str:
    version = tomllib.loads((root / "pyproject.toml").read_text("utf-8"))["project"]["version"]
    digest = hashlib.sha256()
    package = root / "sidecar"
    for path in sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return f"{version}+{digest.hexdigest()[:16]}"


if __name__ == "__main__":
    sys.stdout.write(compute() + "\n")
