"""Issue 33 §3: redact, then cut. A secret placed across every cut point (the stderr ring's byte window, the
2000-character stderr tail, a server's error message cut at 1000/500/300 characters, a provider's error body cut at
200, a worker's bad line cut at 120) leaves no fragment of itself behind."""

from __future__ import annotations

import json
import sys

import anyio
import pytest

from sidecar.core.redact import REDACTED, redact_head, redact_tail, remember_secret
from sidecar.mcp_host.host import _reason
from sidecar.mcp_host.transport import StderrRing, settled_stderr
from sidecar.providers.base import ProviderConfig
from sidecar.providers.openai_compat import OpenAICompatAdapter
from sidecar.workers.protocol import ProtocolViolation, from_worker

SECRET = "plugin-secret-Vb7Qk2Zr9Lx4"
KEY = "sk-" + "Tq8Rw3Yx6Ua1Ps5Dh0Fj2Gk7"


def _fragments(secret: str) -> list[str]:
    """Every piece of ``secret`` long enough to matter (8+ characters)."""
    return [secret[i:j] for i in range(len(secret)) for j in range(i + 8, len(secret) + 1)]


def assert_no_fragment(text: str, secret: str) -> None:
    assert not any(piece in text for piece in _fragments(secret)), text[-300:]


@pytest.mark.parametrize("limit", [120, 200, 300, 500, 1000, 2000])
@pytest.mark.parametrize("secret", [SECRET, KEY])
def test_a_secret_across_the_head_cut_leaves_no_fragment(limit: int, secret: str) -> None:
    for offset in range(1, len(secret)):  # every split of the secret by the cut
        text = "x" * (limit - offset - 1) + " " + secret + " and more"
        kept = redact_head(text, limit, (SECRET,))
        assert len(kept) <= limit and kept.startswith("x")
        assert_no_fragment(kept, secret)
    big = "y" * (limit - 6) + " " + secret + " " + "z" * 5_000_000  # only a window past the cut is scanned
    assert_no_fragment(redact_head(big, limit, (SECRET,)), secret)
    assert redact_head(f"a {secret} b", limit, (SECRET,)) == f"a {REDACTED} b"


@pytest.mark.parametrize("limit", [500, 2000])
def test_a_secret_across_the_tail_cut_leaves_no_fragment(limit: int) -> None:
    for offset in range(1, len(SECRET)):
        text = "head " + SECRET + "x" * (limit - len(SECRET) + offset)
        kept = redact_tail(text, limit, (SECRET,))
        assert len(kept) <= limit and kept.endswith("x")
        assert_no_fragment(kept, SECRET)
    cut_already = SECRET[5:] + "x" * 100  # a ring that dropped its head: the leading fragment is never kept
    assert_no_fragment(redact_tail(cut_already, limit, (SECRET,), head_cut=True), SECRET)


def _ring(data: bytes, limit: int) -> StderrRing:
    ring = StderrRing(limit=limit)
    ring.writer.write(data)
    ring.spawned()  # EOF: the pump thread reads the rest and stops
    ring._thread.join(5)
    assert not ring._thread.is_alive()
    return ring


def test_the_stderr_ring_redacts_before_its_window_and_tail_cuts() -> None:
    remember_secret(SECRET)  # the master key, a stored provider key: known to every redaction of the process
    limit = 4096
    for offset in (1, 7, len(SECRET) - 1):
        # the ring's window (its last `limit` bytes) starts `offset` characters into the secret
        data = b"a" * 20_000 + SECRET.encode() + b"b" * (limit - len(SECRET) + offset)
        ring = _ring(data, limit)
        shown = ring.text()
        assert shown.endswith("b" * 100) and len(shown) <= limit
        assert_no_fragment(shown, SECRET)
    plugin_secret = "per-plugin-Hx2Wq9Nc4Ty8"  # not remembered: the host passes the plugin's own secrets
    data = b"c" * 50_000 + plugin_secret.encode() + b"d" * (2000 - 9)  # across the 2000-char tail cut
    tail = _ring(data, 64 * 1024).text((plugin_secret,), chars=2000)
    assert len(tail) <= 2000 and tail.endswith("d" * 100)
    assert_no_fragment(tail, plugin_secret)


def test_a_failure_reason_is_redacted_before_it_is_cut() -> None:
    plugin_secret = "reason-secret-Pm3Kd8Sv1Xw6"
    reason = _reason(RuntimeError("r" * 490 + plugin_secret), None, (plugin_secret,))
    assert len(reason) <= 500 and reason.startswith("r")
    assert_no_fragment(reason, plugin_secret)


def test_a_provider_error_body_is_redacted_before_it_is_cut() -> None:
    key = "sk-live-" + "Zu4Bn8Cm2Vl6Qa9Ws3Ex7Rd"
    config = ProviderConfig(provider_id="p", preset="openai", protocol="openai", base_url="http://127.0.0.1:9",
                            api_key=key)  # fmt: skip
    provider = OpenAICompatAdapter(config)
    body = ("e" * 190 + f" key {key} rejected").encode()  # not JSON: the text itself is the message
    message, _ = provider.error_details(None, body)
    assert len(message) <= 200
    assert_no_fragment(message, key)


def test_a_bad_worker_line_is_redacted_before_it_is_cut() -> None:
    remember_secret(SECRET)
    line = json.dumps({"not": "a message", "pad": "p" * 100, "leak": SECRET}).encode()
    with pytest.raises(ProtocolViolation) as caught:
        from_worker(line)
    assert_no_fragment(str(caught.value), SECRET)


@pytest.mark.anyio
async def test_a_server_that_exits_at_start_is_quoted_whole() -> None:
    """A server that writes why it gives up and exits: the failed start waits for it to exit and for its stderr to be
    read to the end before quoting it (under load the tail had come empty: the reader thread had not run yet)."""
    ring = StderrRing()
    late = "import sys, time; time.sleep(0.3); sys.stderr.write('giving up at once'); sys.exit(3)"
    process = await anyio.open_process([sys.executable, "-c", late], stderr=ring.writer)
    ring.spawned()
    assert ring.text() == ""  # nothing written yet: quoting now would quote nothing
    await settled_stderr(process, ring)
    assert process.returncode == 3 and "giving up at once" in ring.text()
