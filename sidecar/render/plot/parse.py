"""The fenced ``function_plot`` block (YAML or JSON, §12.2) → :class:`FunctionPlotParseResult` with diagnostics.

Every problem is a diagnostic with a 1-based line/column inside the block (the expression's own column is added
to the position of its YAML/JSON scalar), never an exception. Errors leave ``plot`` unset (the caller keeps the
raw fenced block and shows the diagnostics); warnings (an unknown key, an unusable colour) keep it.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import yaml

from ..models import Diagnostic, FunctionPlot, FunctionPlotAxes, FunctionPlotExpression, FunctionPlotParseResult
from .grammar import PARSE_FAILED, ExpressionError, compile_expression

MAX_EXPRESSIONS = 16
MAX_LABEL_CHARS = 200
MAX_BLOCK_CHARS = 256 * 1024
MAX_VALUES = 20_000  # scalars, lists and mappings once aliases are expanded
WARNING_UNKNOWN_KEY = "FUNCTION_PLOT_UNKNOWN_KEY"
WARNING_COLOR = "FUNCTION_PLOT_COLOR_INVALID"
_TOP_KEYS = {"version", "expressions", "domain", "range", "axes"}
_AXES_KEYS = {"xLabel", "yLabel", "grid"}
_EXPR_KEYS = {"expression", "label", "color"}
# colours end up in SVG attributes: only hex or a plain colour keyword
_COLOR = re.compile(r"#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})|[a-zA-Z]{3,20}")

Pos = tuple[int, int] | None  # (line, column), 1-based


class _Problems(Exception):
    pass


class _Collector:
    def __init__(self, positions: dict[tuple[Any, ...], tuple[int, int, int]]) -> None:
        self.positions = positions  # path -> (line, column, quote width)
        self.diagnostics: list[Diagnostic] = []

    def pos(self, path: tuple[Any, ...]) -> Pos:
        found = self.positions.get(path)
        return (found[0], found[1]) if found else None

    def add(self, severity: str, code: str, message: str, pos: Pos) -> None:
        line, column = pos if pos else (None, None)
        self.diagnostics.append(
            Diagnostic(severity=severity, code=code, message=message, line=line, column=column)  # type: ignore[arg-type]
        )

    def error(self, message: str, path: tuple[Any, ...], code: str = PARSE_FAILED) -> None:
        self.add("error", code, message, self.pos(path))

    @property
    def failed(self) -> bool:
        return any(d.severity == "error" for d in self.diagnostics)


def parse_function_plot(source: str) -> FunctionPlotParseResult:
    if len(source) > MAX_BLOCK_CHARS:
        return _fail(f"the block is longer than {MAX_BLOCK_CHARS} characters", (1, 1))
    try:
        data, positions = _load(source)
    except _LoadError as exc:
        return _fail(exc.message, exc.pos)
    out = _Collector(positions)
    plot = _build_plot(data, out)
    return FunctionPlotParseResult(plot=None if out.failed else plot, diagnostics=out.diagnostics)


def _fail(message: str, pos: Pos) -> FunctionPlotParseResult:
    line, column = pos if pos else (None, None)
    return FunctionPlotParseResult(
        diagnostics=[Diagnostic(severity="error", code=PARSE_FAILED, message=message, line=line, column=column)]
    )


# ------------------------------------------------------------------------------------------- loading
class _LoadError(Exception):
    def __init__(self, message: str, pos: Pos) -> None:
        self.message = message
        self.pos = pos


def _load(source: str) -> tuple[Any, dict[tuple[Any, ...], tuple[int, int, int]]]:
    """JSON when the block starts with ``{``, else YAML (safe loader); positions of every scalar by path."""
    json_data: Any = None
    if source.lstrip().startswith("{"):
        try:
            json_data = json.loads(source)
        except json.JSONDecodeError as exc:
            raise _LoadError(f"invalid JSON: {exc.msg}", (exc.lineno, exc.colno)) from None
        except RecursionError:
            raise _LoadError("the JSON is nested too deeply", (1, 1)) from None
    positions: dict[tuple[Any, ...], tuple[int, int, int]] = {}
    try:
        node = yaml.compose(source, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError) as exc:
        if json_data is not None:  # valid JSON that YAML 1.1 reads differently: positions unknown
            return json_data, positions
        if not isinstance(exc, yaml.MarkedYAMLError):
            raise _LoadError(f"invalid block: {type(exc).__name__}", (1, 1)) from None
        mark = exc.problem_mark or exc.context_mark
        pos = (mark.line + 1, mark.column + 1) if mark else None
        raise _LoadError(f"invalid YAML: {exc.problem or exc.context}", pos) from None
    if node is None:
        raise _LoadError("the block is empty", (1, 1))
    try:
        data = _to_python(node, (), positions)
    except RecursionError:  # an alias cycle (&a [*a]) or very deep nesting
        raise _LoadError("the block is nested too deeply or refers to itself", (1, 1)) from None
    return (json_data if json_data is not None else data), positions


def _to_python(node: yaml.Node, path: tuple[Any, ...], positions: dict[tuple[Any, ...], tuple[int, int, int]]) -> Any:
    if len(positions) > MAX_VALUES:  # aliases of aliases expand exponentially ("billion laughs")
        raise _LoadError(f"the block has more than {MAX_VALUES} values", (1, 1))
    positions[path] = (node.start_mark.line + 1, node.start_mark.column + 1, 1 if _quoted(node) else 0)
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.start_mark)
            out[key] = _to_python(value_node, (*path, key), positions)
            positions.setdefault(
                (*path, ("key", key)), (key_node.start_mark.line + 1, key_node.start_mark.column + 1, 0)
            )
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_to_python(item, (*path, i), positions) for i, item in enumerate(node.value)]
    return yaml.SafeLoader(" ").construct_object(node)  # a scalar: the safe constructor's own typing


def _quoted(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.style in ("'", '"')


# ------------------------------------------------------------------------------------------ checking
def _build_plot(data: Any, out: _Collector) -> FunctionPlot | None:
    if not isinstance(data, dict):
        out.error("a function_plot block is a mapping with an 'expressions' list", ())
        return None
    for key in data:
        if key not in _TOP_KEYS:
            out.add("warning", WARNING_UNKNOWN_KEY, f"unknown key {key!r} ignored", out.pos((("key", key),)))
    version = data.get("version", 1)
    if version != 1:
        out.error(f"unsupported version {version!r} (only 1)", ("version",))
    expressions = _expressions(data.get("expressions"), out)
    domain = _interval(data, "domain", out)
    range_ = _interval(data, "range", out)
    axes = _axes(data.get("axes"), out)
    if out.failed:
        return None
    return FunctionPlot(expressions=expressions, domain=domain, range=range_, axes=axes)


def _expressions(items: Any, out: _Collector) -> list[FunctionPlotExpression]:
    if isinstance(items, str):
        items = [items]
    if not isinstance(items, list) or not items:
        out.error("'expressions' must be a non-empty list", ("expressions",))
        return []
    if len(items) > MAX_EXPRESSIONS:
        out.error(f"at most {MAX_EXPRESSIONS} expressions", ("expressions",))
        return []
    result: list[FunctionPlotExpression] = []
    for i, item in enumerate(items):
        path: tuple[Any, ...] = ("expressions", i)
        if isinstance(item, str | int | float) and not isinstance(item, bool):
            item = {"expression": str(item)}
            expr_path = path
        elif isinstance(item, dict):
            expr_path = (*path, "expression")
            for key in item:
                if key not in _EXPR_KEYS:
                    out.add(
                        "warning", WARNING_UNKNOWN_KEY, f"unknown key {key!r} ignored", out.pos((*path, ("key", key)))
                    )
        else:
            out.error("each expression is a string or a mapping with 'expression'", path)
            continue
        parsed = _expression(item, path, expr_path, out)
        if parsed is not None:
            result.append(parsed)
    return result


def _expression(item: dict[str, Any], path: tuple[Any, ...], expr_path: tuple[Any, ...], out: _Collector):
    text = item.get("expression")
    if isinstance(text, int | float) and not isinstance(text, bool):
        text = str(text)
    if not isinstance(text, str):
        out.error("'expression' must be a string", path)
        return None
    try:
        compile_expression(text)  # parse + constant folding (an overflowing constant is refused here)
    except ExpressionError as exc:
        out.add("error", exc.code, exc.message, _inside(out.positions.get(expr_path), text, exc.column))
        return None
    label = item.get("label")
    if label is not None and (not isinstance(label, str) or len(label) > MAX_LABEL_CHARS):
        out.error(f"'label' must be a string of at most {MAX_LABEL_CHARS} characters", (*path, "label"))
        return None
    color = item.get("color")
    if color is not None and not (isinstance(color, str) and _COLOR.fullmatch(color)):
        out.add(
            "warning",
            WARNING_COLOR,
            "'color' must be #rgb, #rrggbb or a colour name; the palette is used",
            out.pos((*path, "color")),
        )
        color = None
    return FunctionPlotExpression(expression=text, label=label, color=color)


def _inside(found: tuple[int, int, int] | None, text: str, column: int) -> Pos:
    """Block position of ``column`` within an expression scalar (exact for one-line scalars)."""
    if found is None:
        return None
    line, col, quote = found
    if "\n" in text:
        return (line, col)
    return (line, col + quote + column - 1)


def _interval(data: dict[str, Any], key: str, out: _Collector) -> tuple[float, float] | None:
    value = data.get(key)
    if value is None:
        return None
    ok = (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in value)
    )
    if not ok or not value[0] < value[1] or abs(value[1] - value[0]) > 1e12:
        out.error(f"'{key}' must be [min, max] with finite numbers, min < max", (key,))
        return None
    return (float(value[0]), float(value[1]))


def _axes(value: Any, out: _Collector) -> FunctionPlotAxes:
    if value is None:
        return FunctionPlotAxes()
    if not isinstance(value, dict):
        out.error("'axes' must be a mapping (xLabel, yLabel, grid)", ("axes",))
        return FunctionPlotAxes()
    for key in value:
        if key not in _AXES_KEYS:
            out.add("warning", WARNING_UNKNOWN_KEY, f"unknown key {key!r} ignored", out.pos(("axes", ("key", key))))
    labels: dict[str, str | None] = {}
    for key in ("xLabel", "yLabel"):
        label = value.get(key)
        if label is not None and (not isinstance(label, str) or len(label) > MAX_LABEL_CHARS):
            out.error(f"'{key}' must be a string of at most {MAX_LABEL_CHARS} characters", ("axes", key))
            label = None
        labels[key] = label
    grid = value.get("grid", True)
    if not isinstance(grid, bool):
        out.error("'grid' must be true or false", ("axes", "grid"))
        grid = True
    return FunctionPlotAxes(x_label=labels["xLabel"], y_label=labels["yLabel"], grid=grid)
