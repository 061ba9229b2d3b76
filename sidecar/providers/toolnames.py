"""Registry tool names ↔ the names a vendor accepts on the wire.

OpenAI-compatible vendors (and Anthropic) allow only ``[A-Za-z0-9_-]{1,64}`` in function names; the registry
names plugin tools ``<plugin_id>.<tool_name>``. :func:`wire_names` maps every name a request mentions (its tools
and the tool calls in its history) to a valid wire name, reversibly and without collisions: a valid name keeps
itself; another becomes ``plugin__tool`` (``.`` → ``__``, any other character → ``_``), with a short hash suffix
when that is taken or too long. The map depends only on the request, so the payload builder and the stream
assembler compute the same one without sharing state.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from ..ir import MetonaRequest

_VALID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_BAD = re.compile(r"[^A-Za-z0-9_-]")


def wire_names(names: Iterable[str]) -> dict[str, str]:
    """``{registry name: wire name}`` for ``names``: injective, every value valid for every vendor."""
    unique = sorted(set(names))
    out = {n: n for n in unique if _VALID.match(n)}
    used = set(out)
    for name in (n for n in unique if n not in out):
        candidate = _BAD.sub("_", name.replace(".", "__")) or "tool"
        salt = 0
        while len(candidate) > 64 or candidate in used:
            digest = hashlib.sha256(f"{salt}:{name}".encode()).hexdigest()[:8]
            candidate = f"{_BAD.sub('_', name.replace('.', '__'))[:55]}_{digest}"
            salt += 1
        out[name] = candidate
        used.add(candidate)
    return out


def request_names(request: MetonaRequest) -> dict[str, str]:
    """The wire names of every tool the request offers or its history called."""
    names = [t.name for t in request.tools or ()]
    for message in request.messages:
        for call in message.tool_calls or ():
            names.append(call.name)
        if message.tool_result is not None:
            names.append(message.tool_result.tool_name)
    return wire_names(names)
