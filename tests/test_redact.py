"""What never enters a trace (phase-2 §6.4): keys, Authorization headers, secret settings, attachment bodies."""

from __future__ import annotations

import base64

from sidecar.core.redact import REDACTED, clean_text, is_secret_key, sanitize

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


def test_more_credential_names_and_values() -> None:
    data = {"OPENAI_API_KEY": "v", "githubToken": "v", "aws_secret_access_key": "v", "session_token": "v",
            "x-goog-api-key": "v", "token": 12345, "secret": 0, "nan": float("nan"), "inf": float("-inf")}  # fmt: skip
    clean = sanitize(data)
    assert [k for k, v in clean.items() if v == REDACTED] == list(data)[:5]
    assert clean["token"] == 12345 and clean["secret"] == 0, "numbers are not credentials"
    assert clean["nan"] is None and clean["inf"] is None
    url = clean_text("GET https://user:pa55@example.com/x?key=AIzaSyA-123&q=ok")
    assert url == "GET https://[redacted]@example.com/x?key=[redacted]&q=ok"
    assert clean_text("Basic arithmetic and a bearer bond") == "Basic arithmetic and a bearer bond"


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
    assert clean["blob"] == body[:60] + f"…[truncated: {len(body)} chars]", "only what is kept is scanned"
    assert sanitize(body).startswith("[binary body omitted:")
    assert clean["note"] == "x" * 60 + "…[truncated: 90 chars]"
    assert sanitize(["plain", 1, None, {"nested": [{"token": "t"}]}]) == [
        "plain",
        1,
        None,
        {"nested": [{"token": REDACTED}]},
    ]
