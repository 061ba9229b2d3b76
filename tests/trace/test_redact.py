"""What never enters a trace (phase-2 §6.4): keys, Authorization headers, secret settings, attachment bodies."""

from __future__ import annotations

import base64

from sidecar.trace.redact import REDACTED, clean_text, is_secret_key, sanitize

KEY = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX0123456789"


def test_credential_keys_are_redacted_but_token_counts_are_not() -> None:
    data = {
        "api_key": KEY,
        "Authorization": "Bearer abc",
        "headers": {"x-api-key": "k", "content-type": "application/json"},
        "password": "hunter2",
        "client_secret": "s",
        "access_token": "t",
        "cookie": "a=b",
        "input_tokens": 12,
        "max_tokens": 100,
        "token_budget": 5,
        "tokens": 7,
        "secret_santa": "bob",
        "empty_key": "",
        "api_key_configured": True,
    }
    clean = sanitize(data)
    for key in ("api_key", "Authorization", "password", "client_secret", "access_token", "cookie"):
        assert clean[key] == REDACTED, key
    assert clean["headers"] == {"x-api-key": REDACTED, "content-type": "application/json"}
    assert clean["input_tokens"] == 12 and clean["max_tokens"] == 100 and clean["token_budget"] == 5
    assert clean["tokens"] == 7 and clean["secret_santa"] == "bob" and clean["api_key_configured"] is True
    assert not is_secret_key("tokens") and is_secret_key("refresh_token") and is_secret_key("X-Api-Key")


def test_credentials_inside_text_are_cut_out() -> None:
    text = f"call failed: Authorization: Bearer {KEY}; retry with key {KEY} or basic Basic dXNlcjpwYXNzd29yZA=="
    clean = clean_text(text)
    assert KEY not in clean and "dXNlcjpwYXNzd29yZA" not in clean
    assert clean.startswith("call failed: Authorization: Bearer [redacted]")
    assert clean_text("my own secret value 7f3a", secrets=["secret value 7f3a"]) == f"my own {REDACTED}"
    assert clean_text("short ab", secrets=["ab"]) == "short ab", "secrets under 6 chars are not searched for"


def test_attachment_bodies_and_long_strings() -> None:
    body = base64.b64encode(bytes(range(256)) * 8).decode()
    clean = sanitize({"image": f"data:image/png;base64,{body}", "blob": body, "note": "x" * 90}, max_chars=60)
    assert clean["image"].startswith("[attachment body omitted:") and body not in clean["image"]
    assert clean["blob"].startswith("[binary body omitted:")
    assert clean["note"] == "x" * 60 + "…[truncated: 90 chars]"
    assert sanitize(["plain", 1, None, {"nested": [{"token": "t"}]}]) == [
        "plain",
        1,
        None,
        {"nested": [{"token": REDACTED}]},
    ]
