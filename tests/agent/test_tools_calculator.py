"""calculator (an AST walker, never eval) and get_current_time."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from sidecar.agent.tools import ToolContext, ToolError, default_registry
from sidecar.agent.tools.calculator import evaluate
from sidecar.agent.tools.registry import ToolExecution
from sidecar.ir import MetonaToolCall

REG = default_registry()


async def run(tool: str, args: dict[str, Any]) -> ToolExecution:
    ctx = ToolContext(run_id="r", session_id="s", tool_call_id="c")
    return await REG.execute(MetonaToolCall(id="c", name=tool, args=args, iteration=1, timestamp=1), ctx)


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("-7 % 3", 2),
        ("10%3", 1),
        ("5 % (2)", 1),
        ("7.5% * 348.80", 26.16),  # a percentage: no operand after the %
        ("348.80 * 7.5%", 26.16),
        ("50%", 0.5),
        ("2800 / 8600 * 100 %", 32.5581395348837),  # a ratio asked for in percent
        ("(180 - 150) / 150 * 100%", 20.0),
        ("50 * 100%", 50.0),  # no ratio: 100% of 50
        ("200 × 15% ÷ 2", 15.0),
        ("3 − 1", 2),
        ("2 ** 10", 1024),
        ("2 ** -1", 0.5),
        ("-2 ** 2", -4),
        ("+3", 3),
        ("sqrt(16)", 4.0),
        ("log(8, 2)", 3.0),
        ("log(e)", 1.0),
        ("log10(1000)", 3.0),
        ("log2(1024)", 10.0),
        ("abs(-3.5)", 3.5),
        ("round(2.567, 2)", 2.57),
        ("round(2.5)", 2),
        ("min(3, 1, 2)", 1),
        ("max(3, 1, 2)", 3),
        ("sum(354.5, 288, 96, 42)", 780.5),
        ("sum(1, 2, 3)", 6),
        ("sum(82, 91, 77) / 3", 83.3333333333333),
        ("avg(82, 91, 77)", 83.3333333333333),
        ("mean(0.1, 0.2) + average(2)", 2.15),
        ("floor(2.7) + ceil(2.1)", 5),
        ("factorial(10)", 3_628_800),
        ("2 ^ 3", 8),  # a power, as calculators write it (no bitwise XOR here)
        ("15.5% of 8460 + 1240", 2551.3),  # a percentage of an amount
        ("10 % 3 + 50% OF 8", 5.0),  # the remainder stays one
        ("5000 * (1 + 0.06)^10", 8954.23848271427),
        ("-2^2 + 2^3^2", 508),
        ("($14.99 * 12) + (€ 9.49 * 12) - ¥(1)", 292.76),  # a currency sign before an amount: the amount
        ("monthly_payment(4.5%, 360, 250000)", 1266.71327456471),  # a 30-year mortgage
        ("monthly_payment(5.25%, 36, 14000)", 421.165787204975),
        ("monthly_payment(0, 10, 1000)", 100.0),  # no interest: the principal in equal parts
        ("1 < 2 <= 2", True),
        ("3 == 4", False),
        ("2 ** 100", 1_267_650_600_228_229_401_496_703_205_376),
        ("1_000 * 3", 3000),
        ("1e3 + 1", 1001.0),
        ("0.1 + 0.2", 0.3),  # binary rounding's last digits go (15 significant digits are kept)
        ("348.80 * 0.075 + 348.80", 374.96),
        ("1 / 3", 0.333333333333333),
        ("2 ** 0.5 * 1e300", 1.41421356237310e300),
    ],
)
def test_values(expression: str, value: Any) -> None:
    got = evaluate(expression)
    assert got == value and type(got) is type(value)


def test_trig_and_constants() -> None:
    assert math.isclose(evaluate("sin(pi / 2)"), 1.0)  # type: ignore[arg-type]
    assert math.isclose(evaluate("cos(tau)"), 1.0)  # type: ignore[arg-type]
    assert math.isclose(evaluate("atan(1) * 4"), math.pi)  # type: ignore[arg-type]
    assert math.isclose(evaluate("exp(1)"), math.e)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("expression", "code"),
    [
        ("__import__('os')", "INVALID_EXPRESSION"),
        ("__import__('os').system('echo hi')", "INVALID_EXPRESSION"),
        ("(1).real", "INVALID_EXPRESSION"),
        ("pi.__class__", "INVALID_EXPRESSION"),
        ("().__class__.__bases__[0]", "INVALID_EXPRESSION"),
        ("[1, 2][0]", "INVALID_EXPRESSION"),
        ("lambda: 1", "INVALID_EXPRESSION"),
        ("'a' * 3", "INVALID_EXPRESSION"),
        ("x + 1", "INVALID_EXPRESSION"),
        ("open('f')", "INVALID_EXPRESSION"),
        ("sqrt(x=4)", "INVALID_EXPRESSION"),
        ("sqrt(1, 2)", "INVALID_EXPRESSION"),
        ("True + 1", "INVALID_EXPRESSION"),
        ("1j * 2", "INVALID_EXPRESSION"),
        ("1 +", "INVALID_EXPRESSION"),
        ("1 if 1 else 2", "INVALID_EXPRESSION"),
        ("1" * 501, "INVALID_EXPRESSION"),
        ("1 / 0", "MATH_ERROR"),
        ("5 % 0", "MATH_ERROR"),
        ("sqrt(-1)", "MATH_ERROR"),
        ("log(0)", "MATH_ERROR"),
        ("(-8) ** 0.5", "MATH_ERROR"),
        ("factorial(-1)", "MATH_ERROR"),
        ("factorial(2.5)", "MATH_ERROR"),
        ("monthly_payment(5%, 0, 1000)", "MATH_ERROR"),
        ("monthly_payment(-1300%, 10, 1000)", "MATH_ERROR"),
        ("monthly_payment(5%, 36)", "INVALID_EXPRESSION"),
        ("9 ** 9 ** 9", "RESULT_TOO_LARGE"),
        ("2 ** 100000", "RESULT_TOO_LARGE"),
        ("10 ** 5000", "RESULT_TOO_LARGE"),
        ("2.0 ** 5000", "RESULT_TOO_LARGE"),
        ("1e308 * 10", "RESULT_TOO_LARGE"),
        ("1e999", "RESULT_TOO_LARGE"),
        ("exp(1000)", "RESULT_TOO_LARGE"),
        ("factorial(1001)", "RESULT_TOO_LARGE"),
        ("factorial(1000) * factorial(1000)", "RESULT_TOO_LARGE"),
        ("round(1.5, 1000)", "INVALID_EXPRESSION"),
    ],
)
def test_refusals(expression: str, code: str) -> None:
    with pytest.raises(ToolError) as info:
        evaluate(expression)
    assert info.value.code == code, info.value.message


def test_messages_are_clear() -> None:
    with pytest.raises(ToolError, match="division by zero"):
        evaluate("1/0")
    with pytest.raises(ToolError, match="unknown name 'x'"):
        evaluate("x")


@pytest.mark.anyio
async def test_calculator_tool() -> None:
    ok = await run("calculator", {"expression": "6 * 7"})
    assert ok.error_code is None
    assert ok.result.result == {"expression": "6 * 7", "value": 42}
    assert ok.result.summary == "6 * 7 = 42"
    bad = await run("calculator", {"expression": "__import__('os')"})
    assert bad.error_code == "INVALID_EXPRESSION" and bad.result.success is False
    big = await run("calculator", {"expression": "factorial(1000)"})
    assert big.error_code is None and len(str(big.result.result["value"])) == 2568


# --- get_current_time -------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_current_time_in_a_zone() -> None:
    before = datetime.now(ZoneInfo("Asia/Tokyo"))
    result = await run("get_current_time", {"timezone": "Asia/Tokyo"})
    assert result.error_code is None
    r = result.result.result
    assert r["timezone"] == "Asia/Tokyo"
    assert r["iso"].endswith("+09:00")
    assert abs(r["unix_ms"] - before.timestamp() * 1000) < 5_000
    parsed = datetime.fromisoformat(r["iso"])
    assert r["weekday"] == parsed.strftime("%A")


@pytest.mark.anyio
async def test_current_time_local_and_unknown_zone() -> None:
    local = await run("get_current_time", {})
    assert local.error_code is None and local.result.result["timezone"]
    assert datetime.fromisoformat(local.result.result["iso"]).tzinfo is not None
    for zone in ("Mars/Olympus", "../../etc/passwd"):
        bad = await run("get_current_time", {"timezone": zone})
        assert bad.error_code == "UNKNOWN_TIMEZONE", zone
