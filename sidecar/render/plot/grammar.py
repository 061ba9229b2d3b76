"""The whitelist expression grammar of function plots (phase-2 §12.2): parsed, never ``eval``-ed.

    expr    := term (('+' | '-') term)*
    term    := unary (('*' | '/') unary)*
    unary   := ('-' | '+') unary | power
    power   := primary ('^' unary)?            (right-associative: 2^3^2 = 2^(3^2); -x^2 = -(x^2))
    primary := NUMBER | 'x' | 'pi' | 'e' | FUNC '(' expr (',' expr)* ')' | '(' expr ')'

Only the names in :data:`FUNCTIONS` and :data:`CONSTANTS` (and the variable ``x``) exist. There is no attribute
access, no string, no call on anything but a listed name, and length and nesting are bounded. Parsing yields a
small AST that :func:`compile_expression` turns into a closure over :mod:`math`; every operation is on floats,
so ``9^9^9^9`` cannot build a huge integer (constant sub-expressions are folded at compile time and one that
overflows is refused). Errors carry a 1-based column inside the expression.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

MAX_EXPRESSION_CHARS = 500
MAX_DEPTH = 40
MAX_NUMBER_CHARS = 40

PARSE_FAILED = "FUNCTION_PLOT_PARSE_FAILED"
UNSAFE = "FUNCTION_PLOT_EXPRESSION_UNSAFE"


def _log(x: float, base: float | None = None) -> float:
    return math.log(x) if base is None else math.log(x, base)


def _pow(a: float, b: float) -> float:
    if a < 0 and not float(b).is_integer():
        return math.nan  # a real plot: no complex results
    return math.pow(a, b)


# name -> (function, min arity, max arity)
FUNCTIONS: dict[str, tuple[Callable[..., float], int, int]] = {
    "sin": (math.sin, 1, 1),
    "cos": (math.cos, 1, 1),
    "tan": (math.tan, 1, 1),
    "asin": (math.asin, 1, 1),
    "acos": (math.acos, 1, 1),
    "atan": (math.atan, 1, 1),
    "sinh": (math.sinh, 1, 1),
    "cosh": (math.cosh, 1, 1),
    "tanh": (math.tanh, 1, 1),
    "exp": (math.exp, 1, 1),
    "log": (_log, 1, 2),  # natural log; log(x, base)
    "ln": (math.log, 1, 1),
    "log10": (math.log10, 1, 1),
    "sqrt": (math.sqrt, 1, 1),
    "abs": (abs, 1, 1),
    "floor": (math.floor, 1, 1),
    "ceil": (math.ceil, 1, 1),
    "min": (min, 2, 16),
    "max": (max, 2, 16),
    "pow": (_pow, 2, 2),
}
CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}
VARIABLE = "x"


class ExpressionError(ValueError):
    """A refused expression: ``code`` is PARSE_FAILED or UNSAFE, ``column`` is 1-based within the expression."""

    def __init__(self, code: str, message: str, column: int) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.column = column


# ------------------------------------------------------------------------------------------------- AST
@dataclass(frozen=True, slots=True)
class Num:
    value: float


@dataclass(frozen=True, slots=True)
class Var:
    pass


@dataclass(frozen=True, slots=True)
class Unary:
    op: str
    operand: Node


@dataclass(frozen=True, slots=True)
class Binary:
    op: str
    left: Node
    right: Node
    column: int


@dataclass(frozen=True, slots=True)
class Call:
    name: str
    args: tuple[Node, ...]
    column: int


Node = Num | Var | Unary | Binary | Call


# ------------------------------------------------------------------------------------------- tokenizer
@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # 'num' | 'name' | 'op' | 'end'
    text: str
    column: int  # 1-based


_OPS = set("+-*/^(),")
# characters that mean someone is trying to write code, not maths
_CODE_CHARS = {
    ".": "attribute access",
    "'": "string",
    '"': "string",
    "[": "indexing",
    "]": "indexing",
    "{": "braces",
    "}": "braces",
    ":": "lambda/slice",
    ";": "statement",
    "=": "assignment",
    "_": "underscore name",
    "@": "decorator",
    "`": "backtick",
    "\\": "escape",
    "#": "comment",
    "!": "operator",
    "&": "operator",
    "|": "operator",
    "~": "operator",
    "<": "operator",
    ">": "operator",
    "%": "operator",
    "$": "dollar",
    "?": "operator",
}


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        col = i + 1
        if ch in " \t":
            i += 1
        elif ch.isdigit() or (ch == "." and i + 1 < n and text[i + 1].isdigit()):
            j = _scan_number(text, i)
            if j - i > MAX_NUMBER_CHARS:
                raise ExpressionError(UNSAFE, f"number longer than {MAX_NUMBER_CHARS} characters", col)
            tokens.append(Token("num", text[i:j], col))
            i = j
        elif ch.isascii() and ch.isalpha():
            j = i
            while j < n and text[j].isascii() and (text[j].isalnum()):
                j += 1
            if j < n and (text[j] == "_" or text[j] == "."):
                kind = "attribute access" if text[j] == "." else "underscore name"
                raise ExpressionError(UNSAFE, f"{kind} is not allowed", j + 1)
            tokens.append(Token("name", text[i:j], col))
            i = j
        elif text.startswith("**", i):  # Python's power operator, read as ^
            tokens.append(Token("op", "^", col))
            i += 2
        elif ch in _OPS:
            tokens.append(Token("op", ch, col))
            i += 1
        elif ch in _CODE_CHARS:
            raise ExpressionError(UNSAFE, f"{_CODE_CHARS[ch]} ({ch!r}) is not allowed in an expression", col)
        else:
            raise ExpressionError(PARSE_FAILED, f"unexpected character {ch!r}", col)
    tokens.append(Token("end", "", n + 1))
    return tokens


def _scan_number(text: str, i: int) -> int:
    n = len(text)
    j = i
    while j < n and text[j].isdigit():
        j += 1
    if j < n and text[j] == ".":
        j += 1
        while j < n and text[j].isdigit():
            j += 1
    if j < n and text[j] in "eE":
        k = j + 1
        if k < n and text[k] in "+-":
            k += 1
        if k < n and text[k].isdigit():
            while k < n and text[k].isdigit():
                k += 1
            j = k
    return j


# ---------------------------------------------------------------------------------------------- parser
class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.depth = 0

    @property
    def tok(self) -> Token:
        return self.tokens[self.pos]

    def take(self) -> Token:
        tok = self.tokens[self.pos]
        self.pos += 1
        return tok

    def expect(self, text: str) -> Token:
        if self.tok.kind == "op" and self.tok.text == text:
            return self.take()
        raise ExpressionError(PARSE_FAILED, f"expected {text!r}, found {_describe(self.tok)}", self.tok.column)

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExpressionError(UNSAFE, f"expression nested deeper than {MAX_DEPTH} levels", self.tok.column)

    def expr(self) -> Node:
        self.enter()
        node = self.term()
        while self.tok.kind == "op" and self.tok.text in "+-":
            op = self.take()
            node = Binary(op.text, node, self.term(), op.column)
        self.depth -= 1
        return node

    def term(self) -> Node:
        node = self.unary()
        while self.tok.kind == "op" and self.tok.text in "*/":
            op = self.take()
            node = Binary(op.text, node, self.unary(), op.column)
        return node

    def unary(self) -> Node:
        if self.tok.kind == "op" and self.tok.text in "+-":
            op = self.take()
            self.enter()
            operand = self.unary()
            self.depth -= 1
            return operand if op.text == "+" else Unary("-", operand)
        return self.power()

    def power(self) -> Node:
        base = self.primary()
        if self.tok.kind == "op" and self.tok.text == "^":
            op = self.take()
            self.enter()
            exponent = self.unary()
            self.depth -= 1
            return Binary("^", base, exponent, op.column)
        return base

    def primary(self) -> Node:
        tok = self.tok
        if tok.kind == "num":
            self.take()
            value = float(tok.text)
            if not math.isfinite(value):
                raise ExpressionError(UNSAFE, f"number {tok.text} is out of range", tok.column)
            node: Node = Num(value)
        elif tok.kind == "name":
            node = self.name()
        elif tok.kind == "op" and tok.text == "(":
            self.take()
            node = self.expr()
            self.expect(")")
        else:
            raise ExpressionError(
                PARSE_FAILED, f"expected a number, x, a function or '(', found {_describe(tok)}", tok.column
            )
        if self.tok.kind == "op" and self.tok.text == "(":
            raise ExpressionError(UNSAFE, "only the listed functions can be called", self.tok.column)
        if self.tok.kind in ("num", "name"):
            raise ExpressionError(
                PARSE_FAILED, f"missing operator before {_describe(self.tok)} (write '*')", self.tok.column
            )
        return node

    def name(self) -> Node:
        tok = self.take()
        name = tok.text
        if name == VARIABLE:
            return Var()
        if name in CONSTANTS:
            return Num(CONSTANTS[name])
        if name not in FUNCTIONS:
            raise ExpressionError(
                UNSAFE, f"unknown name {name!r} (allowed: x, pi, e, {', '.join(FUNCTIONS)})", tok.column
            )
        if not (self.tok.kind == "op" and self.tok.text == "("):
            raise ExpressionError(PARSE_FAILED, f"function {name!r} needs '(' and its arguments", self.tok.column)
        self.take()
        args = [self.expr()]
        while self.tok.kind == "op" and self.tok.text == ",":
            self.take()
            args.append(self.expr())
        self.expect(")")
        _, lo, hi = FUNCTIONS[name]
        if not lo <= len(args) <= hi:
            want = str(lo) if lo == hi else f"{lo} to {hi}"
            raise ExpressionError(PARSE_FAILED, f"{name}() takes {want} argument(s), got {len(args)}", tok.column)
        return Call(name, tuple(args), tok.column)


def _describe(tok: Token) -> str:
    return "the end of the expression" if tok.kind == "end" else repr(tok.text)


def parse_expression(text: str) -> Node:
    """Parse one expression (raises :class:`ExpressionError`)."""
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(UNSAFE, f"expression longer than {MAX_EXPRESSION_CHARS} characters", 1)
    if not text.strip():
        raise ExpressionError(PARSE_FAILED, "empty expression", 1)
    parser = _Parser(tokenize(text))
    node = parser.expr()
    if parser.tok.kind != "end":
        raise ExpressionError(PARSE_FAILED, f"unexpected {_describe(parser.tok)}", parser.tok.column)
    return node


# ------------------------------------------------------------------------------------------- compiler
Fn = Callable[[float], float]


def _binop(op: str, a: float, b: float) -> float:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return a / b
    return _pow(a, b)


def _fold(node: Node) -> Node:
    """Fold constant sub-expressions; one that overflows or is undefined is refused at compile time."""
    if isinstance(node, Unary):
        inner = _fold(node.operand)
        return Num(-inner.value) if isinstance(inner, Num) else Unary("-", inner)
    if isinstance(node, Binary):
        left, right = _fold(node.left), _fold(node.right)
        if isinstance(left, Num) and isinstance(right, Num):
            return Num(_checked(lambda: _binop(node.op, left.value, right.value), node.column))
        return Binary(node.op, left, right, node.column)
    if isinstance(node, Call):
        args = tuple(_fold(a) for a in node.args)
        if all(isinstance(a, Num) for a in args):
            fn = FUNCTIONS[node.name][0]
            return Num(_checked(lambda: float(fn(*(a.value for a in args))), node.column))  # type: ignore[union-attr]
        return Call(node.name, args, node.column)
    return node


def _checked(compute: Callable[[], float], column: int) -> float:
    try:
        value = compute()
    except OverflowError:
        raise ExpressionError(UNSAFE, "a constant part of the expression overflows", column) from None
    except (ValueError, ZeroDivisionError):
        raise ExpressionError(PARSE_FAILED, "a constant part of the expression is undefined", column) from None
    if math.isinf(value):
        raise ExpressionError(UNSAFE, "a constant part of the expression overflows", column)
    return value


def _build(node: Node) -> Fn:
    if isinstance(node, Num):
        value = node.value
        return lambda x: value
    if isinstance(node, Var):
        return lambda x: x
    if isinstance(node, Unary):
        inner = _build(node.operand)
        return lambda x: -inner(x)
    if isinstance(node, Binary):
        return _build_binary(node)
    fn = FUNCTIONS[node.name][0]
    parts = [_build(a) for a in node.args]
    if len(parts) == 1:
        only = parts[0]
        return lambda x: fn(only(x))
    return lambda x: fn(*(p(x) for p in parts))


def _build_binary(node: Binary) -> Fn:
    a, b = _build(node.left), _build(node.right)
    if node.op == "+":
        return lambda x: a(x) + b(x)
    if node.op == "-":
        return lambda x: a(x) - b(x)
    if node.op == "*":
        return lambda x: a(x) * b(x)
    if node.op == "/":
        return lambda x: a(x) / b(x)
    return lambda x: _pow(a(x), b(x))


def compile_expression(text: str) -> Callable[[float], float]:
    """Parse + fold + compile to ``f(x) -> float``; the result returns NaN where the function is undefined."""
    body = _build(_fold(parse_expression(text)))

    def evaluate(x: float) -> float:
        try:
            return float(body(x))
        except (ValueError, ZeroDivisionError, OverflowError, TypeError):
            return math.nan

    return evaluate
