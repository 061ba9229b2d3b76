"""The process's last step (sidecar/__main__.py): it leaves with the serve loop's exit code even when the host is gone
and took the read end of our stderr with it (a SIGKILLed app)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support.sidecar_proc import ROOT

# The serve loop stands in for the way out after the host died: log lines and workers' output go to a stderr whose
# reader is gone; a buffered writer keeps what it could not write (as strace showed of the sidecar after a SIGKILLed
# app: each failed write() carried the earlier lines again), so the final flush fails too.
PROGRAM = textwrap.dedent(
    """
    import io, os, sys
    import sidecar.app

    def serve_after_the_host_died(settings, *served):  # run(settings, stdio, first)
        read, write = os.pipe()
        os.close(read)
        os.dup2(write, 2)
        sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", closefd=False), encoding="utf-8", line_buffering=True)
        try:
            print("stopping 2 child process(es)", file=sys.stderr)
        except BrokenPipeError:
            pass
        return 7

    sidecar.app.run = serve_after_the_host_died
    from sidecar.__main__ import main
    main(["--data-dir", sys.argv[1]])
    """
)


def test_the_exit_code_survives_a_dead_stderr(tmp_path: Path) -> None:
    env = {**os.environ, "METONA_SECRET_KEY_FILE": str(tmp_path / "key")}
    proc = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(tmp_path / "data")], cwd=ROOT, env=env, capture_output=True, timeout=60
    )
    # not 120 (the interpreter's own exit when its last stderr flush fails): os._exit(code) was reached
    assert proc.returncode == 7, proc.stderr.decode(errors="replace")[-2000:]
