"""Issue 21: every human CLI's stderr (its own lines, argparse's errors, log records and their tracebacks) goes
through the one redaction the stdio server's logs use (``sidecar.cli.output.start_cli``), with the values of the
environment's credential variables among the known secrets."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sidecar.core.redact import REDACTED, RedactingStream
from tests.support.sidecar_proc import sidecar_cmd

ROOT = Path(__file__).resolve().parents[2]
# a provider key in the environment that looks like nothing in particular, and one shaped like an OpenAI key
ENV_KEY = "Zq8vcanary3Lw1Xy7"
SHAPED_KEY = "sk-proj-" + "A1b2C3d4" * 4
# each CLI with the arguments that get it past its required ones, so argparse echoes the unknown ones on stderr
CLIS = {
    "export": ["note.md", "--format", "html"],
    "transcribe": ["talk.wav"],
    "bench": ["rag", "--dataset", "d"],
    "local-model": ["prepare"],
    "demo": [],
}


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "METONA_DATA_DIR": str(tmp_path / "data"), "OPENAI_API_KEY": ENV_KEY}


@pytest.mark.parametrize("cli", sorted(CLIS))
def test_a_cli_never_echoes_a_secret_on_stderr(cli: str, tmp_path: Path) -> None:
    """A mistyped option carrying a key (``--api-key sk-…``, or the value of $OPENAI_API_KEY) used to be echoed
    back by argparse as it was."""
    argv = [*sidecar_cmd(), cli, *CLIS[cli], "--api-key", ENV_KEY, SHAPED_KEY]
    done = subprocess.run(argv, capture_output=True, text=True, env=_env(tmp_path), cwd=ROOT, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "unrecognized arguments" in done.stderr and REDACTED in done.stderr, done.stderr
    assert ENV_KEY not in done.stderr and SHAPED_KEY not in done.stderr, done.stderr
    assert ENV_KEY not in done.stdout and SHAPED_KEY not in done.stdout


def test_the_cli_start_redacts_log_records_tracebacks_and_plain_writes(tmp_path: Path) -> None:
    code = (
        "import logging, sys\n"
        "from sidecar.cli.output import start_cli\n"
        "start_cli()\n"
        "start_cli()\n"  # twice: one wrapper, one filter
        f"secret = {SHAPED_KEY!r}\n"
        "try:\n"
        "    raise RuntimeError('provider said: invalid key ' + secret)\n"
        "except RuntimeError:\n"
        "    logging.getLogger('sidecar.providers').exception('call failed with %s', secret)\n"
        "logging.getLogger('x').warning('env key %s', sys.argv[1])\n"
        "sys.stderr.write('error: bad key ' + sys.argv[1] + '\\n')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, ENV_KEY],
        capture_output=True,
        text=True,
        env={**_env(tmp_path), "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    err = done.stderr
    assert "Traceback" in err and "RuntimeError" in err and "call failed with" in err, err
    assert "env key" in err and "error: bad key" in err, err
    assert SHAPED_KEY not in err and ENV_KEY not in err, err
    assert err.count(REDACTED) >= 4, err


def test_the_redacting_stream_cuts_each_write_and_passes_the_rest_through() -> None:
    raw = io.StringIO()
    stream = RedactingStream(raw)
    assert stream.write(f"key {SHAPED_KEY}\n") == len(f"key {SHAPED_KEY}\n")
    stream.write("plain text\n")
    stream.flush()
    assert raw.getvalue() == f"key {REDACTED}\nplain text\n"
    assert stream.getvalue() == raw.getvalue()  # anything else is the wrapped stream's
