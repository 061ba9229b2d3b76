"""``calculator``: arithmetic over a parsed expression tree, never ``eval``.

The expression is parsed with :func:`ast.parse` and walked node by node; only numbers, arithmetic and comparison
operators, a few constants and a fixed set of math functions are understood. Everything else (names, attributes,
subscripts, lambdas, strings, ...) is refused before anything runs. Results are bounded so a short expression
cannot pin the CPU or memory: exponents, integer size, factorials and float overflow are all checked.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from typing import Any

from pydantic import Field

from sidecar.ir import MetonaRiskLevel, MetonaToolCategory

from .base import Tool, ToolContext, ToolError, ToolOutput, ToolParams

MAX_EXPRESSION_CHARS = 500
MAX_EXPONENT = 10_000
MAX_INT_DIGITS = 4_000
"""Below Python's 4,300-digit int→str limit, so every result can be shown."""
_MAX_INT_BITS = int(MAX_INT_DIGITS * math.log2(10))
MAX_FACTORIAL = 1_000
MAX_ARGS = 100

Number = int | float

CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


def _log(x: Number, base: Number | None = None) -> float:
    return math.log(x) if base is None else math.log(x, base)


def _round(x: Number, ndigits: int | None = None) -> Number:
    if ndigits is None:
        return round(x)
    if not isinstance(ndigits, int) or abs(ndigits) > 100:
        raise ToolError("round: ndigits must be an integer between -100 and 100", "INVALID_EXPRESSION")
    return round(x, ndigits)


def _factorial(x: Number) -> int:
    if isinstance(x, float):
        if not x.is_integer():
            raise ToolError("factorial needs a whole number", "MATH_ERROR")
        x = int(x)
    if x < 0:
        raise ToolError("factorial needs a number >= 0", "MATH_ERROR")
    if x > MAX_FACTORIAL:
        raise ToolError(f"factorial is limited to n <= {MAX_FACTORIAL}", "RESULT_TOO_LARGE")
    return math.factorial(x)


def _monthly_payment(annual_rate: Number, months: Number, principal: Number) -> float:
    """The monthly payment that repays ``principal`` in ``months`` equal payments at ``annual_rate`` a year,
    compounded monthly (an annuity: a loan's or a mortgage's payment, ``monthly_payment(4.5%, 360, 250000)``
    = 1266.71); the arithmetic behind it (``P * r / (1 - (1 + r) ** -n)``, ``r`` a month's rate) is where the
    small local model went wrong (multiplying where it divides, the year's rate as a month's)."""
    if months <= 0:
        raise ToolError("monthly_payment needs a number of months > 0", "MATH_ERROR")
    rate = annual_rate / 12
    if rate == 0:
        return principal / months
    if rate <= -1:
        raise ToolError("monthly_payment needs an annual rate above -1200%", "MATH_ERROR")
    return principal * rate / (1 - (1 + rate) ** -months)


def _min(*args: Number) -> Number:
    return min(args)


def _max(*args: Number) -> Number:
    return max(args)


def _sum(*args: Number) -> Number:
    return math.fsum(args) if any(isinstance(a, float) for a in args) else sum(args)


def _mean(*args: Number) -> float:
    return math.fsum(args) / len(args)


# name -> (function, min args, max args)
FUNCTIONS: dict[str, tuple[Callable[..., Any], int, int]] = {
    "sqrt": (math.sqrt, 1, 1),
    "sin": (math.sin, 1, 1),
    "cos": (math.cos, 1, 1),
    "tan": (math.tan, 1, 1),
    "asin": (math.asin, 1, 1),
    "acos": (math.acos, 1, 1),
    "atan": (math.atan, 1, 1),
    "log": (_log, 1, 2),
    "log10": (math.log10, 1, 1),
    "log2": (math.log2, 1, 1),
    "exp": (math.exp, 1, 1),
    "abs": (abs, 1, 1),
    "round": (_round, 1, 2),
    "min": (_min, 1, MAX_ARGS),
    "max": (_max, 1, MAX_ARGS),
    "sum": (_sum, 1, MAX_ARGS),
    "mean": (_mean, 1, MAX_ARGS),
    "avg": (_mean, 1, MAX_ARGS),
    "average": (_mean, 1, MAX_ARGS),
    "floor": (math.floor, 1, 1),
    "ceil": (math.ceil, 1, 1),
    "factorial": (_factorial, 1, 1),
    "monthly_payment": (_monthly_payment, 3, 3),
}


_PERCENT = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*%(?!\s*[\w.(])")
"""A number followed by ``%`` that no operand follows: a percentage (``12% * 250``, ``200 * 15%``), not the
remainder operator (``10 % 3``)."""
_SIGNS = str.maketrans({"×": "*", "÷": "/", "−": "-", "^": "**"})
_CURRENCY = re.compile(r"[$€£¥￥₹](?=\s*[\d.(])")
"""A currency sign before an amount (``$14.99 * 12``): the amount. The arguments model wrote ``($14.99 * 12) + …``
for a yearly saving from monthly prices, and was refused (agent-mine-v6, a tuning set, 2026-12-05)."""
_PERCENT_OF = re.compile(r"%\s*of\b", re.IGNORECASE)
"""``15.5% of 8460``: a percentage of an amount, as calculators read it (``15.5% * 8460``)."""
_IN_PERCENT = re.compile(r"(?<=[\d)])(\s*\*\s*100)\s*%\s*$")
"""``* 100%`` ending a ratio (an expression with a ``/``): the ratio asked for in percent (``2800 / 8600 * 100 %`` is
32.56, the share in percent), not a multiplication by one (``50 * 100%`` is still 50). The arguments model wrote
it so for "what percent of my pay is the rent?" and "增长了百分之几？" (requests written for this, 2026-12-05, 2 of
14), and the answer said 0.33%."""


def _written(expression: str) -> str:
    """The expression as people (and models) write it, in Python's arithmetic: ``7.5%`` → ``(7.5/100)``,
    ``×`` ``÷`` ``−`` → ``*`` ``/`` ``-``, ``^`` → ``**`` (a power, as calculators and spreadsheets read it: the
    arguments model wrote ``5000 * (1 + 0.06)^10`` for a compound interest, and was refused). A model asked for a
    percentage of an amount wrote ``12% * 250``, which Python reads as a remainder and refused, and ``15.5% of 8460
    + 1240`` (:data:`_PERCENT_OF`). ``* 100%`` ending a ratio gives it in percent (:data:`_IN_PERCENT`). A
    currency sign before an amount is the amount (:data:`_CURRENCY`)."""
    text = _PERCENT_OF.sub("% *", _CURRENCY.sub("", expression).translate(_SIGNS)).rstrip()
    if "/" in text:
        text = _IN_PERCENT.sub(r"\1", text)
    return _PERCENT.sub(r"(\1/100)", text)


SIGNIFICANT_DIGITS = 15
"""The digits a float result keeps: as many as a double always holds (``DBL_DIG``), so the last digits of binary
rounding go: ``348.80 * 0.075 + 348.80`` is 374.96, not 374.96000000000004, and ``0.1 + 0.2`` is 0.3 — the value a
user (and the model writing the answer, which copied the noise into a file) expects."""


def _shown(value: Any) -> Any:
    """A float result to :data:`SIGNIFICANT_DIGITS` (ints and booleans as they are)."""
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}") if isinstance(value, float) else value


def evaluate(expression: str) -> Number | bool:
    """The value of ``expression``; ``ToolError`` (INVALID_EXPRESSION, MATH_ERROR, RESULT_TOO_LARGE) otherwise."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ToolError(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters", "INVALID_EXPRESSION")
    try:
        tree = ast.parse(_written(expression).strip(), mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"syntax error in the expression: {exc.msg}", "INVALID_EXPRESSION") from None
    except (ValueError, RecursionError, MemoryError):
        raise ToolError("the expression cannot be parsed", "INVALID_EXPRESSION") from None
    try:
        return _shown(_Evaluator().visit(tree.body))
    except ToolError:
        raise
    except ZeroDivisionError:
        raise ToolError("division by zero", "MATH_ERROR") from None
    except OverflowError:
        raise ToolError("the result is too large", "RESULT_TOO_LARGE") from None
    except (ValueError, ArithmeticError) as exc:
        raise ToolError(f"math error: {exc}", "MATH_ERROR") from None
    except RecursionError:
        raise ToolError("the expression is nested too deeply", "INVALID_EXPRESSION") from None


class _Evaluator:
    def visit(self, node: ast.AST) -> Any:
        method = getattr(self, f"visit_{type(node).__name__}", None)
        if method is None:
            raise ToolError(f"{_describe(node)} is not allowed in a calculation", "INVALID_EXPRESSION")
        return _check(method(node))

    def visit_Constant(self, node: ast.Constant) -> Number:
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise ToolError(f"{node.value!r} is not a number", "INVALID_EXPRESSION")
        return node.value

    def visit_Name(self, node: ast.Name) -> float:
        if node.id not in CONSTANTS:
            known = ", ".join([*CONSTANTS, *FUNCTIONS])
            raise ToolError(f"unknown name {node.id!r}; known names: {known}", "INVALID_EXPRESSION")
        return CONSTANTS[node.id]

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Number:
        value = self.visit(node.operand)
        if isinstance(node.op, ast.USub):
            return -value
        if isinstance(node.op, ast.UAdd):
            return +value
        raise ToolError(f"{_describe(node.op)} is not allowed in a calculation", "INVALID_EXPRESSION")

    def visit_BinOp(self, node: ast.BinOp) -> Number:
        left, right = self.visit(node.left), self.visit(node.right)
        if isinstance(node.op, ast.Pow):
            return _power(left, right)
        func = _BINARY.get(type(node.op))
        if func is None:
            raise ToolError(f"{_describe(node.op)} is not allowed in a calculation", "INVALID_EXPRESSION")
        return func(left, right)

    def visit_Compare(self, node: ast.Compare) -> bool:
        left = self.visit(node.left)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            func = _COMPARE.get(type(op))
            if func is None:
                raise ToolError(f"{_describe(op)} is not allowed in a calculation", "INVALID_EXPRESSION")
            right = self.visit(comparator)
            if not func(left, right):
                return False
            left = right
        return True

    def visit_Call(self, node: ast.Call) -> Number:
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            raise ToolError(
                f"unknown function; allowed functions: {', '.join(FUNCTIONS)}",
                "INVALID_EXPRESSION",
            )
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise ToolError("functions take plain positional arguments only", "INVALID_EXPRESSION")
        func, lo, hi = FUNCTIONS[node.func.id]
        if not lo <= len(node.args) <= hi:
            raise ToolError(f"{node.func.id} takes {lo}-{hi} arguments", "INVALID_EXPRESSION")
        return func(*(self.visit(a) for a in node.args))


def _power(base: Any, exponent: Any) -> Number:
    if abs(exponent) > MAX_EXPONENT:
        raise ToolError(f"exponents are limited to ±{MAX_EXPONENT}", "RESULT_TOO_LARGE")
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        if (abs(base).bit_length() - 1) * exponent > _MAX_INT_BITS:
            raise ToolError(f"the result would have more than {MAX_INT_DIGITS} digits", "RESULT_TOO_LARGE")
    result = base**exponent
    if isinstance(result, complex):
        raise ToolError("the result is not a real number", "MATH_ERROR")
    return result


def _check(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError("the result is too large (or not a number)", "RESULT_TOO_LARGE")
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > _MAX_INT_BITS:
        raise ToolError(f"the result has more than {MAX_INT_DIGITS} digits", "RESULT_TOO_LARGE")
    return value


def _describe(node: ast.AST) -> str:
    labels = {
        ast.Attribute: "attribute access",
        ast.Subscript: "indexing",
        ast.Lambda: "lambda",
        ast.BoolOp: "and/or",
        ast.IfExp: "if/else",
    }
    return labels.get(type(node), f"'{type(node).__name__}'")


class CalculatorParams(ToolParams):
    expression: str = Field(
        min_length=1,
        max_length=MAX_EXPRESSION_CHARS,
        description="e.g. '(3 + 4) * 2 ** 10 / sqrt(2)'",
    )


class Calculator(Tool):
    name = "calculator"
    description = (
        "Evaluate an arithmetic expression exactly: + - * / // % ** (or ^) and comparisons (a number then % with no "
        "operand after it is a percentage: 7.5% = 0.075); pi, e, tau; sqrt, sin, cos, "
        "tan, asin, acos, atan (radians), log(x[, base]), log10, log2, exp, abs, round(x[, digits]), min, max, "
        "sum, mean (avg, average), floor, ceil, factorial, monthly_payment(annual rate, "
        "months (years * 12), principal) (a loan's)."
    )
    Params = CalculatorParams
    category = MetonaToolCategory.CALCULATION
    risk_level = MetonaRiskLevel.SAFE
    timeout_ms = 5_000
    examples = ("17% of 2350 is how much exactly?",)

    async def run(self, args: CalculatorParams, ctx: ToolContext) -> ToolOutput:
        value = evaluate(args.expression)
        return ToolOutput(
            result={"expression": args.expression, "value": value}, summary=f"{args.expression} = {value}"
        )
