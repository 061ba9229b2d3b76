"""Token estimates (CJK-aware, fast) and the calibrator."""

from __future__ import annotations

import time

import pytest

from sidecar.agent.tokens import (
    MESSAGE_OVERHEAD,
    TokenCalibrator,
    estimate_message_tokens,
    estimate_system_prompt_tokens,
    estimate_tokens,
    estimate_tools_tokens,
)
from sidecar.ir import (
    MetonaImageContent,
    MetonaMessage,
    MetonaSystemPrompt,
    MetonaToolCall,
    MetonaToolDef,
    MetonaToolParams,
    MetonaToolResult,
)
from sidecar.ir.tools import MetonaParamField

EN = "The quick brown fox jumps over the lazy dog and keeps running through the field. "
ZH = "我们今天讨论一下上下文压缩的策略，确保不会丢失任何重要的事实。"


def test_empty_and_tiny() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("a") == 1
    assert estimate_tokens("你") == 1


def test_english_is_about_chars_over_four() -> None:
    text = EN * 10
    n = estimate_tokens(text)
    assert len(text) / 5 <= n <= len(text) / 3


def test_cjk_is_about_one_token_per_char() -> None:
    text = ZH * 10
    n = estimate_tokens(text)
    assert len(text) * 0.9 <= n <= len(text) * 1.1


def test_cjk_costs_far_more_per_char_than_english() -> None:
    en, zh = EN * 20, ZH * 20
    ratio = (estimate_tokens(zh) / len(zh)) / (estimate_tokens(en) / len(en))
    assert ratio > 3


def test_kana_hangul_and_fullwidth_count_as_cjk() -> None:
    for text in ("ひらがなカタカナ", "한국어텍스트", "，。！？：；（）"):
        assert estimate_tokens(text * 10) == len(text) * 10


def test_punctuation_heavy_text_is_denser_than_prose() -> None:
    json_text = '{"a": 1, "b": [2, 3], "c": {"d": null}}' * 20
    prose = ("abcd efgh ijkl mnop " * 40)[: len(json_text)]
    assert estimate_tokens(json_text) > estimate_tokens(prose)


def test_monotonic_in_appended_text() -> None:
    text = ""
    last = 0
    for piece in [EN, ZH, "{}[]", "привет", "😀", "x", EN, ZH]:
        text += piece
        n = estimate_tokens(text)
        assert n >= last  # never decreases
        assert n >= last + estimate_tokens(piece) - 1  # grows by about the piece (rounding)
        last = n


def test_fast_enough() -> None:
    text = (EN + ZH + '{"k": "v"} привет ') * 20_000  # a few MB of mixed text
    size = len(text.encode("utf-8"))
    t0 = time.perf_counter()
    estimate_tokens(text)
    elapsed = time.perf_counter() - t0
    assert size / elapsed > 5_000_000, f"{size / elapsed / 1e6:.1f} MB/s"


def _msg(role: str = "user", content: str = "", **kw: object) -> MetonaMessage:
    return MetonaMessage.model_validate({"role": role, "content": content, "timestamp": 1, **kw})


def test_message_tokens_count_every_part() -> None:
    base = estimate_message_tokens(_msg("assistant", "hi"))
    assert base == estimate_tokens("hi") + MESSAGE_OVERHEAD
    with_reasoning = estimate_message_tokens(_msg("assistant", "hi", reasoning_content=EN * 5))
    assert with_reasoning == base + estimate_tokens(EN * 5)
    call = MetonaToolCall(id="c1", name="knowledge_search", args={"query": EN * 5}, iteration=1, timestamp=1)
    with_call = estimate_message_tokens(_msg("assistant", "hi", tool_calls=[call]))
    assert with_call > base + estimate_tokens(EN * 5)
    image = estimate_message_tokens(_msg("user", "hi", images=[MetonaImageContent(url="data:x", detail="low")]))
    assert image > base


def test_tool_result_uses_summary_else_result_json() -> None:
    big = {"rows": [EN] * 50}
    raw = MetonaToolResult(tool_call_id="c", tool_name="t", result=big, success=True, duration_ms=1, timestamp=1)
    summarised = raw.model_copy(update={"summary": "50 rows"})
    n_raw = estimate_message_tokens(_msg("tool", tool_result=raw))
    n_sum = estimate_message_tokens(_msg("tool", tool_result=summarised))
    assert n_raw > 50 * estimate_tokens(EN) * 0.9
    assert n_sum == MESSAGE_OVERHEAD + estimate_tokens("50 rows")


def test_tools_and_prompt_tokens() -> None:
    tool = MetonaToolDef(
        name="knowledge_search",
        description="Search the user's notes",
        parameters=MetonaToolParams(properties={"query": MetonaParamField(type="string", description="what")}),
        category="search",
        risk_level="safe",
        requires_permission=False,
        timeout_ms=1000,
    )
    assert estimate_tools_tokens([]) == 0
    one = estimate_tools_tokens([tool])
    assert one >= estimate_tokens(tool.model_dump_json(include={"name", "description", "parameters"}))
    assert one < estimate_tokens(tool.model_dump_json())  # Metona-only fields are not sent to the model
    assert estimate_tools_tokens([tool, tool]) == 2 * one
    p = MetonaSystemPrompt(role_definition=EN, output_constraints=EN, safety_guidelines=EN)
    assert estimate_system_prompt_tokens(p) > 3 * estimate_tokens(EN)
    assert estimate_system_prompt_tokens(
        p.model_copy(update={"dynamic_reminders": ZH})
    ) > estimate_system_prompt_tokens(p)


def test_calibrator_starts_neutral() -> None:
    c = TokenCalibrator()
    assert c.factor == 1.0
    assert c.apply(1000) == 1000
    assert c.apply(0) == 0


def test_calibrator_first_observation_sets_factor_then_moves_by_ema() -> None:
    c = TokenCalibrator(alpha=0.5)
    c.observe(1000, 1500)
    assert c.factor == pytest.approx(1.5)
    assert c.apply(1000) == 1500
    c.observe(1000, 1000)
    assert c.factor == pytest.approx(1.25)
    assert c.observations == 2


def test_calibrator_converges_and_is_clamped() -> None:
    c = TokenCalibrator()
    for _ in range(50):
        c.observe(1000, 2000)
    assert c.factor == pytest.approx(2.0, rel=1e-3)
    c2 = TokenCalibrator()
    c2.observe(1000, 4000)
    assert c2.factor == TokenCalibrator.MAX_FACTOR
    c3 = TokenCalibrator()
    c3.observe(1000, 300)
    assert c3.factor == TokenCalibrator.MIN_FACTOR


def test_calibrator_ignores_implausible_reports() -> None:
    """A report 5x off is not a tokenizer difference (cache reads excluded, a placeholder count): ignored."""
    c = TokenCalibrator()
    c.observe(2000, 3)
    c.observe(100, 100_000)
    assert c.factor == 1.0 and c.observations == 0
    c.observe(1000, 1200)
    c.observe(2000, 3)
    assert c.factor == pytest.approx(1.2) and c.observations == 1


def test_calibrator_ignores_missing_usage() -> None:
    c = TokenCalibrator()
    c.observe(0, 100)
    c.observe(100, 0)
    assert c.factor == 1.0
    assert c.observations == 0


def test_calibrator_rejects_bad_alpha() -> None:
    with pytest.raises(ValueError):
        TokenCalibrator(alpha=0)
