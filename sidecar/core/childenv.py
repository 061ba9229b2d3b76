"""The environment a child process gets when it needs none of the sidecar's secrets (issue 21, §7.6).

The master key (``METONA_SECRET_KEY``), provider keys (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ...), tokens and
passwords stay in the sidecar: a browser, a renderer driver or a model worker never needs them, and a child's
environment is readable by anything running as the user (``/proc/<pid>/environ``) and inherited by the child's own
children. A plugin's MCP server is the one exception: it gets its own settings and secrets, nothing else (see
``mcp_host``). Stdlib only: workers import it before anything heavy.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

SECRET_NAME_MARKERS = (
    "SECRET",
    "API_KEY",
    "APIKEY",
    "ACCESS_KEY",
    "PRIVATE_KEY",
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
)
"""A variable whose upper-cased name contains one of these is a secret (``METONA_SECRET_KEY``, ``HF_TOKEN``,
``AZURE_OPENAI_API_KEY``, ``GOOGLE_APPLICATION_CREDENTIALS``, ``NPM_AUTH_TOKEN``, ...)."""


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    return any(marker in upper for marker in SECRET_NAME_MARKERS)


def scrubbed_environ(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (the process's own by default) without the variables that carry a secret."""
    source = os.environ if environ is None else environ
    return {k: v for k, v in source.items() if not is_secret_name(k)}
