"""Token estimates for context budgeting, and a calibrator that learns from the provider's reported usage.

No tokenizer ships with the sidecar (every provider has its own), so the estimate is a fast rule that is close
enough to decide *when* to compress:

* CJK ideographs, kana, hangul and fullwidth punctuation: about one token per character;
* ASCII letters, digits and spaces: about four characters per token (the usual ``chars / 4``);
* ASCII punctuation and symbols: about a third of a token each (JSON and code are punctuation-heavy; prose
  punctuation is a token of its own, but runs like ``":{"`` merge into one);
* any other character (accented Latin, Cyrillic, emoji, ...): half a token each.

Counting is done by C-level primitives (``str.encode``, ``bytes.translate``, one precompiled regex ``sub``), so
it is O(n) and runs at tens of MB/s. The error of the rule is corrected per provider by :class:`TokenCalibrator`,
which compares our estimate of a request with the ``input_tokens`` the provider reports for it.
"""

from __future__ import annotations

import json
import math
import re
import string
from collections.abc import Iterable
from typing import Any

from sidecar.ir import MetonaMessage, MetonaSystemPrompt, MetonaToolDef

__all__ = [
    "MESSAGE_OVERHEAD",
    "TokenCalibrator",
    "estimate_message_tokens",
    "estimate_system_prompt_tokens",
    "estimate_tokens",
    "estimate_tools_tokens",
]

MESSAGE_OVERHEAD = 4
"""Tokens a chat format spends per message (role markers, separators)."""

_CJK_RUN = re.compile(
    "["
    "\u1100-\u11ff"  # hangul jamo
    "\u2e80-\u2fdf"  # CJK radicals, Kangxi radicals
    "\u3000-\u303f"  # CJK symbols and punctuation (、。「」…)
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3100-\u312f"  # bopomofo
    "\u3130-\u318f"  # hangul compatibility jamo
    "\u31f0-\u31ff"  # katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\ufe30-\ufe4f"  # CJK compatibility forms
    "\uff00-\uffef"  # halfwidth and fullwidth forms (，！？：)
    "\U00020000-\U0003134f"  # CJK extensions B-G
    "]+"
)
_ASCII_PUNCT = string.punctuation.encode("ascii")

_CJK_WEIGHT = 1.0
_ASCII_TEXT_WEIGHT = 0.25
_ASCII_PUNCT_WEIGHT = 0.35
_OTHER_WEIGHT = 0.5

_IMAGE_TOKENS = {"low": 85}
_IMAGE_TOKENS_DEFAULT = 765
"""A typical high-detail image (OpenAI's 512-px tile accounting for a ~1024-px image)."""


def estimate_tokens(text: str) -> int:
    """The estimated token count of ``text`` (0 for the empty string), CJK-aware; see the module docstring."""
    if not text:
        return 0
    n = len(text)
    ascii_bytes = text.encode("ascii", "ignore")
    n_ascii = len(ascii_bytes)
    n_punct = n_ascii - len(ascii_bytes.translate(None, _ASCII_PUNCT))
    n_cjk = 0
    if n_ascii != n:  # fast path: pure ASCII needs no regex pass
        n_cjk = n - len(_CJK_RUN.sub("", text))
    n_other = n - n_ascii - n_cjk
    tokens = (
        n_cjk * _CJK_WEIGHT
        + (n_ascii - n_punct) * _ASCII_TEXT_WEIGHT
        + n_punct * _ASCII_PUNCT_WEIGHT
        + n_other * _OTHER_WEIGHT
    )
    return max(1, math.ceil(tokens))


def _json(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def estimate_message_tokens(m: MetonaMessage) -> int:
    """The tokens ``m`` costs in a request: its text, thinking, tool calls (name + JSON args), tool result (the
    summary the adapters send, else the raw result as JSON, plus the error), images, + :data:`MESSAGE_OVERHEAD`."""
    total = MESSAGE_OVERHEAD + estimate_tokens(m.content)
    if m.reasoning_content:
        total += estimate_tokens(m.reasoning_content)
    for call in m.tool_calls or ():
        total += estimate_tokens(call.name) + estimate_tokens(_json(call.args)) + MESSAGE_OVERHEAD
    result = m.tool_result
    if result is not None:
        total += estimate_tokens(result.summary) if result.summary else estimate_tokens(_json(result.result))
        if result.error:
            total += estimate_tokens(result.error)
    for image in m.images or ():
        total += _IMAGE_TOKENS.get(image.detail or "", _IMAGE_TOKENS_DEFAULT)
    return total


def estimate_messages_tokens(messages: Iterable[MetonaMessage]) -> int:
    """The sum of :func:`estimate_message_tokens` over ``messages``."""
    return sum(estimate_message_tokens(m) for m in messages)


_TOOL_FIELDS = {"name", "description", "parameters"}


def estimate_tools_tokens(tools: list[MetonaToolDef]) -> int:
    """The tokens the tool declarations cost: the JSON of what the adapters send of them (name, description,
    parameters schema; not the Metona-only category/risk/permission fields), + a small overhead per tool."""
    return sum(estimate_tokens(t.model_dump_json(include=_TOOL_FIELDS)) + MESSAGE_OVERHEAD for t in tools)


def estimate_system_prompt_tokens(prompt: MetonaSystemPrompt) -> int:
    """The tokens of the system prompt sections (the adapter joins them into one system message)."""
    sections = (prompt.role_definition, prompt.output_constraints, prompt.safety_guidelines, prompt.dynamic_reminders)
    return MESSAGE_OVERHEAD + sum(estimate_tokens(s) + 2 for s in sections if s)


class TokenCalibrator:
    """Learns how far :func:`estimate_tokens` is off for one provider/model.

    The agent loop calls :meth:`observe` with our (uncalibrated) estimate of a request and the ``input_tokens``
    the provider reported for that same request; :attr:`factor` is an exponential moving average of
    ``reported / estimated``, clamped to [0.5, 3.0] so one odd response (a cached prefix, a provider that counts
    differently) cannot make the budget absurd. It is 1.0 until something has been observed.

    An observation whose ratio is beyond what any tokenizer difference explains (below 1/5 or above 5) is
    ignored, not clamped: it means the report does not count the same thing (Anthropic's ``input_tokens``
    excludes cache reads, a provider or fake that reports a placeholder), and following it would make the
    budget wrong in the dangerous direction.
    """

    MIN_FACTOR = 0.5
    MAX_FACTOR = 3.0
    PLAUSIBLE = (0.2, 5.0)

    def __init__(self, *, alpha: float = 0.3) -> None:
        if not 0 < alpha <= 1:
            raise ValueError("alpha must be in (0, 1]")
        self._alpha = alpha
        self._factor = 1.0
        self._observations = 0

    @property
    def factor(self) -> float:
        return self._factor

    @property
    def observations(self) -> int:
        return self._observations

    def observe(self, estimated: int, reported: int) -> None:
        """Record one request: ``estimated`` by us (uncalibrated), ``reported`` by the provider. Non-positive
        values (a provider that reports no usage) and implausible ratios are ignored."""
        if estimated <= 0 or reported <= 0:
            return
        ratio = reported / estimated
        if not self.PLAUSIBLE[0] <= ratio <= self.PLAUSIBLE[1]:
            return
        ratio = min(self.MAX_FACTOR, max(self.MIN_FACTOR, ratio))
        if self._observations == 0:
            self._factor = ratio
        else:
            self._factor = self._alpha * ratio + (1 - self._alpha) * self._factor
        self._factor = min(self.MAX_FACTOR, max(self.MIN_FACTOR, self._factor))
        self._observations += 1

    def apply(self, n: int) -> int:
        """``n`` estimated tokens, corrected by :attr:`factor` (rounded up)."""
        if n <= 0:
            return 0
        return math.ceil(n * self._factor)
