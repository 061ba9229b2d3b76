"""What the reference says about a method beyond its schemas, read from the code (used by gen_ipc_schema.py for
``ipc_schema/openrpc.json`` and by the docs build for the method reference and the error table).

* **Errors**: a static walk of the handler's calls (its own module, what it imports by name, and the methods of its
  own package called on an attribute) collecting every :class:`sidecar.core.errors.SidecarError` subclass it
  constructs, with the ``code=``/``status=`` given there or the class's defaults. It is an over-approximation (a
  branch that cannot happen for this method still counts) and misses what another package raises through a call on
  an attribute (e.g. a shared job store's own error); the protocol errors every method can answer are added apart.
* **Emits**: the sidecar notifications named by a string literal in the same walk, the stream lines of the two
  methods that write them, and the resource events of the jobs a method starts (a domain with a ``.../events``).
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "sidecar"

# Protocol errors (ARCHITECTURE.md §4): every method may answer these, whatever its code does.
PROTOCOL_ERRORS: list[tuple[int, str, str]] = [
    (-32602, "VALIDATION_ERROR", "The params do not match the method's params schema; details.errors lists the paths."),
    (-32800, "REQUEST_CANCELLED", "The request was cancelled with $/cancelRequest before it finished."),
    (-32002, "NOT_INITIALIZED", "A request other than initialize, ping or exit came before initialize succeeded."),
    (-32603, "INTERNAL_ERROR", "A bug: the sidecar failed in a way it did not expect (never on purpose)."),
]
NO_INIT_NEEDED = {"initialize", "ping"}

# The methods that write MetonaStreamEvent lines (ARCHITECTURE.md §2) before their result.
STREAMS = {
    "chat/stream": (
        "MetonaStreamEvent lines for `request.meta.requestId` (seq from 0, one `done` last), then the result."
    ),
    "agent/runs/create": (
        "When `request.params.stream` is true: each model call's MetonaStreamEvent lines (one requestId per "
        "iteration) while the run goes on."
    ),
}


@dataclass(frozen=True, order=True)
class ErrorUse:
    """One error a method can answer: wire integer, ``data.code``, and a message the code gives for it."""

    status: int
    code: str
    message: str = field(compare=False, default="")


@dataclass
class _Module:
    name: str
    tree: ast.Module
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = field(default_factory=dict)
    imports: dict[str, tuple[str, str]] = field(default_factory=dict)
    consts: dict[str, Any] = field(default_factory=dict)


class CodeIndex:
    """Every module of ``sidecar/`` parsed once: functions, methods by package, error classes, imports."""

    def __init__(self) -> None:
        self.modules: dict[str, _Module] = {}
        self.methods: dict[str, dict[str, list[tuple[str, ast.AST]]]] = {}  # package -> name -> [(module, def)]
        self.classes: dict[str, tuple[list[str], dict[str, Any]]] = {}  # class name -> (bases, class attrs)
        self.class_methods: dict[str, dict[str, tuple[str, ast.AST]]] = {}  # class -> method -> (module, def)
        self.fields: dict[str, dict[str, str]] = {}  # class -> attribute -> the class name it holds
        for path in sorted(PACKAGE.rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            name = ".".join(rel.parts).removesuffix(".__init__")
            mod = _Module(name, ast.parse(path.read_text(encoding="utf-8")))
            self.modules[name] = mod
            package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
            for node in mod.tree.body:
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    mod.functions[node.name] = node
                elif isinstance(node, ast.ClassDef):
                    attrs = _class_attrs(node)
                    self.classes.setdefault(node.name, ([_name(b) for b in node.bases], attrs))
                    self.fields.setdefault(node.name, _fields(node))
                    for item in node.body:
                        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                            self.methods.setdefault(package, {}).setdefault(item.name, []).append((name, item))
                            self.class_methods.setdefault(node.name, {}).setdefault(item.name, (name, item))
                elif isinstance(node, ast.ImportFrom):
                    base = _resolve_from(name, package, node)
                    for alias in node.names:
                        mod.imports[alias.asname or alias.name] = (base, alias.name)
                elif isinstance(node, ast.Assign | ast.AnnAssign):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    if isinstance(node.value, ast.Constant):
                        for t in targets:
                            if isinstance(t, ast.Name):
                                mod.consts[t.id] = node.value.value

    def error_class(self, name: str) -> tuple[int, str] | None:
        """(status, default code) of a SidecarError subclass, or None for any other name."""
        status: int | None = None
        code: str | None = None
        seen = set()
        current = name
        while current and current not in seen:
            seen.add(current)
            if current not in self.classes:
                return None
            bases, attrs = self.classes[current]
            status = attrs.get("status") if status is None else status
            code = attrs.get("default_code") if code is None else code
            if current == "SidecarError":
                return (status or 500, code or "INTERNAL_ERROR")
            current = bases[0] if bases else ""
        return None


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return _name(node.value)
    return ""


def _type_name(node: ast.AST | None) -> str:
    """The class an annotation names: ``Foo``, ``"Foo"``, ``Foo | None``, ``mod.Foo`` → ``Foo``."""
    if node is None:
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return _type_name(ast.parse(node.value, mode="eval").body)
        except SyntaxError:
            return ""
    if isinstance(node, ast.BinOp):
        return _type_name(node.left) or _type_name(node.right)
    if isinstance(node, ast.Name | ast.Attribute):
        name = _name(node)
        return "" if name == "None" else name
    return ""


def _params(fn: ast.AST) -> dict[str, str]:
    if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
        return {}
    args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
    return {a.arg: t for a in args if (t := _type_name(a.annotation))}


def _fields(node: ast.ClassDef) -> dict[str, str]:
    """``self.x``'s class: class-level annotations, ``self.x: T``, ``self.x = param`` (annotated) or ``T(...)``."""
    out: dict[str, str] = {}
    for item in node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            if t := _type_name(item.annotation):
                out[item.target.id] = t
    for item in node.body:
        if not isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        params = _params(item)
        for sub in ast.walk(item):
            if isinstance(sub, ast.AnnAssign) and _is_self_attr(sub.target):
                if t := _type_name(sub.annotation):
                    out.setdefault(_name(sub.target), t)
            elif isinstance(sub, ast.Assign) and len(sub.targets) == 1 and _is_self_attr(sub.targets[0]):
                attr = _name(sub.targets[0])
                if isinstance(sub.value, ast.Name) and sub.value.id in params:
                    out.setdefault(attr, params[sub.value.id])
                elif isinstance(sub.value, ast.Call) and _name(sub.value.func)[:1].isupper():
                    out.setdefault(attr, _name(sub.value.func))
    return out


def _is_self_attr(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


def _class_attrs(node: ast.ClassDef) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for item in node.body:
        if isinstance(item, ast.Assign) and isinstance(item.value, ast.Constant):
            for t in item.targets:
                if isinstance(t, ast.Name):
                    attrs[t.id] = item.value.value
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            if isinstance(item.value, ast.Constant):
                attrs[item.target.id] = item.value.value
    return attrs


def _resolve_from(module: str, package: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    if node.level > 1:
        parts = parts[: len(parts) - (node.level - 1)]
    return ".".join([*parts, node.module] if node.module else parts)


class Walk:
    """The errors and notification names reachable from one function."""

    MAX_DEPTH = 8

    def __init__(self, index: CodeIndex, notifications: set[str]) -> None:
        self.index = index
        self.notifications = notifications
        self.errors: set[ErrorUse] = set()
        self.emits: set[str] = set()
        self._seen: set[int] = set()

    def visit(
        self, module: str, fn: ast.AST, depth: int = 0, owner: str = "", scope: dict[str, str] | None = None
    ) -> None:
        """Walk ``fn`` (a method of class ``owner``, if any; ``scope``: names of the enclosing function → class)."""
        if id(fn) in self._seen or depth > self.MAX_DEPTH:
            return
        self._seen.add(id(fn))
        mod = self.index.modules[module]
        types = {**(scope or {}), **_params(fn)}
        for node in ast.walk(fn):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node is not fn:
                types.update(_params(node))
        for node in ast.walk(fn):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in self.notifications:
                self.emits.add(node.value)
            elif isinstance(node, ast.Name) and isinstance(mod.consts.get(node.id), str):
                if mod.consts[node.id] in self.notifications:
                    self.emits.add(mod.consts[node.id])
            if not isinstance(node, ast.Call):
                continue
            callee = _name(node.func)
            err = self.index.error_class(callee)
            if err is not None:
                self._record(mod, node, err)
                continue
            for kw in node.keywords:  # a shared store told which code its not-found is (jobs, runs)
                if kw.arg == "not_found_code" and isinstance(code := _literal(mod, kw.value), str):
                    self.errors.add(ErrorUse(404, code, "The id names nothing of this kind."))
            # the call itself, and functions handed to it (anyio.to_thread.run_sync(fn, ...))
            for func in [node.func, *(a for a in node.args if isinstance(a, ast.Name | ast.Attribute))]:
                for target_mod, target, cls in self._targets(mod, func, owner, types):
                    self.visit(target_mod, target, depth + 1, cls)

    def _targets(
        self, mod: _Module, func: ast.AST, owner: str, types: dict[str, str]
    ) -> list[tuple[str, ast.AST, str]]:
        callee = _name(func)
        if isinstance(func, ast.Name):
            if callee in mod.functions:
                return [(mod.name, mod.functions[callee], "")]
            if callee in mod.imports:
                src, name = mod.imports[callee]
                target = self.index.modules.get(src)
                if target is not None and name in target.functions:
                    return [(src, target.functions[name], "")]
            return []
        if not isinstance(func, ast.Attribute):
            return []
        receiver = func.value
        cls = ""
        if isinstance(receiver, ast.Name):
            cls = owner if receiver.id in ("self", "cls") else types.get(receiver.id, "")
        elif _is_self_attr(receiver) and owner:
            cls = self._field(owner, _name(receiver))
        found = self._method(cls, callee) if cls else None
        return [(found[0], found[1], found[2])] if found else []

    def _field(self, cls: str, attr: str) -> str:
        for c in self._mro(cls):
            if attr in self.index.fields.get(c, {}):
                return self.index.fields[c][attr]
        return ""

    def _method(self, cls: str, name: str) -> tuple[str, ast.AST, str] | None:
        for c in self._mro(cls):
            if name in self.index.class_methods.get(c, {}):
                module, node = self.index.class_methods[c][name]
                return module, node, c
        return None

    def _mro(self, cls: str) -> list[str]:
        out: list[str] = []
        todo = [cls]
        while todo and len(out) < 20:
            c = todo.pop(0)
            if c in out or c not in self.index.classes:
                continue
            out.append(c)
            todo.extend(self.index.classes[c][0])
        return out

    def _record(self, mod: _Module, call: ast.Call, default: tuple[int, str]) -> None:
        status, code = default
        message = ""
        for kw in call.keywords:
            value = _literal(mod, kw.value)
            if kw.arg == "code" and not isinstance(value, str):
                return  # the code is the caller's (a variable): recorded where the caller names it
            if kw.arg == "code" and isinstance(value, str):
                code = value
            elif kw.arg == "status" and isinstance(value, int):
                status = value
            elif kw.arg == "message" and isinstance(value, str):
                message = value
        if call.args:
            first = call.args[0]
            if isinstance(first, ast.JoinedStr):
                first_text = "".join(
                    v.value if isinstance(v, ast.Constant) else "…" for v in first.values if isinstance(v, ast.AST)
                )
                message = message or first_text
            else:
                value = _literal(mod, first)
                if isinstance(value, str):
                    message = message or value
        self.errors.add(ErrorUse(status, code, message))


def _literal(mod: _Module, node: ast.AST) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return mod.consts.get(node.id)
    return None


def method_facts(router: Any) -> dict[str, dict[str, Any]]:
    """Method name → {"errors": [ErrorUse...] (sorted, one per code), "emits": [str...]} for the schema's methods."""
    index = CodeIndex()
    notification_names = {n.method for n in router.notifications}
    names = {m.name for m in router if not m.dev}
    job_domains = {n.rsplit("/", 1)[0] for n in names if n.endswith("/events")}
    facts: dict[str, dict[str, Any]] = {}
    for m in router:
        if m.dev:
            continue
        walk = Walk(index, notification_names)
        handler = inspect.unwrap(m.handler)
        source = inspect.getsourcefile(handler)
        if source and Path(source).resolve().is_relative_to(PACKAGE):
            rel = Path(source).resolve().relative_to(ROOT).with_suffix("")
            module = ".".join(rel.parts).removesuffix(".__init__")
            line = handler.__code__.co_firstlineno
            tree = index.modules[module].tree
            scope: dict[str, str] = {}
            for node in ast.walk(
                tree
            ):  # the factory's params (``methods(exports: ExportService)``) type the closure's names
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    scope.update(_params(node))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.lineno == line:
                    owner = next(
                        (
                            c.name
                            for c in ast.walk(tree)
                            if isinstance(c, ast.ClassDef) and any(i is node for i in c.body)
                        ),
                        "",
                    )
                    walk.visit(module, node, 0, owner, scope)
                    break
        by_code: dict[str, ErrorUse] = {}
        for e in sorted(walk.errors, key=lambda e: (e.status, e.code, e.message == "", e.message)):
            by_code.setdefault(e.code, e)
        emits = sorted(walk.emits)
        domain = m.name.rsplit("/", 1)[0]
        if m.name == "events/subscribe":
            emits.append("event")
        elif (domain in job_domains and m.name.endswith("/create")) or m.name == "index/rebuild":
            emits.append("resource events")
        facts[m.name] = {"errors": sorted(by_code.values()), "emits": sorted(set(emits))}
    return facts


def protocol_errors(method: str) -> list[tuple[int, str, str]]:
    return [e for e in PROTOCOL_ERRORS if not (e[1] == "NOT_INITIALIZED" and method in NO_INIT_NEEDED)]
