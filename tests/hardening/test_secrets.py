"""Issue 21, secrets: one redaction for everything that leaves the process (child output, error details, logs)
and an environment without secrets for the children that need none (Playwright's driver and Chromium)."""

from __future__ import annotations

import logging
import os
import shutil
import sys
from pathlib import Path

import pytest

from sidecar.core.childenv import is_secret_name, scrubbed_environ
from sidecar.core.redact import REDACTED, RedactingFilter, cut_credentials, remember_secret, sanitize
from sidecar.render.browser import BrowserPool, PageProfile

CANARY = "canary-Zq8w1Lr5Xy2v"


def test_a_remembered_secret_is_cut_from_every_later_redaction() -> None:
    value = "plain-looking-value-4f7e2a"  # no credential shape: only remembering it finds it
    assert cut_credentials(f"server said {value}") == f"server said {value}"
    remember_secret(value)
    assert cut_credentials(f"server said {value}!") == f"server said {REDACTED}!"
    assert sanitize({"stderr_tail": f"x {value} y"}) == {"stderr_tail": f"x {REDACTED} y"}
    remember_secret("short")  # under 6 characters: never remembered (it would cut ordinary words)
    assert cut_credentials("a short text") == "a short text"


def test_log_records_pass_through_the_redaction(caplog: pytest.LogCaptureFixture) -> None:
    remember_secret(CANARY)
    log = logging.getLogger("tests.hardening.redact")
    handler = logging.StreamHandler()
    handler.addFilter(RedactingFilter())
    record = log.makeRecord(log.name, logging.WARNING, __file__, 1, "key %s refused (%s)", (CANARY, "sk-" + "a" * 20),
                            None)  # fmt: skip
    try:
        raise ValueError(f"boom {CANARY}")
    except ValueError:
        record.exc_info = sys.exc_info()
    assert handler.filter(record)
    text = logging.Formatter().format(record)
    assert CANARY not in text and "sk-aaaa" not in text and text.count(REDACTED) >= 3


def test_the_child_environment_has_no_secret() -> None:
    env = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "METONA_SECRET_KEY": "k",
        "METONA_SECRET_KEY_FILE": "/k",
        "OPENAI_API_KEY": "k",
        "AZURE_OPENAI_APIKEY": "k",
        "HF_TOKEN": "k",
        "DB_PASSWORD": "k",
        "GOOGLE_APPLICATION_CREDENTIALS": "/c.json",
        "AWS_SECRET_ACCESS_KEY": "k",
        "LANG": "C.UTF-8",
    }
    assert scrubbed_environ(env) == {"PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8"}
    assert is_secret_name("anthropic_api_key") and not is_secret_name("TOKENIZERS_PARALLELISM_X".replace("TOKEN", "T"))


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode("utf-8", "replace").split("\0") if "=" in item)


def _cmdline(pid: int) -> bytes:
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        return fh.read()


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


@pytest.mark.anyio
async def test_playwright_driver_and_chromium_get_no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None or sys.platform != "linux":
        pytest.skip("needs Chromium and /proc")
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    monkeypatch.setenv("METONA_SECRET_KEY", CANARY + "-master")
    pool = BrowserPool(chromium)

    async def setup(page: object) -> None:
        return None

    try:
        async with pool.page(PageProfile("env", setup)):
            assert pool.pid is not None
            driver = [p for p in _children(os.getpid()) if b"run-driver" in _cmdline(p)]
            assert driver, "the Playwright driver was not found"
            for pid in (*driver, pool.pid):
                env = _environ(pid)
                assert "PATH" in env
                assert CANARY not in "\0".join(f"{k}={v}" for k, v in env.items()), pid
                assert "OPENAI_API_KEY" not in env and "METONA_SECRET_KEY" not in env
    finally:
        await pool.close()
