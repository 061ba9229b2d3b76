"""The house rules of ``sidecar/`` that no single test of behaviour would notice (issue 18):

- no loops between folders: for any two packages, at most one imports the other (imports inside functions and
  under ``TYPE_CHECKING`` count: a lazy import is still a dependency);
- no module imports a private name (``_name``, or a name from a ``_module``) from another package;
- the root holds the entry points only: ``__init__``, ``__main__``, ``app`` and the composition root ``wiring``.

A package here is a first-level folder of ``sidecar/`` (``sidecar.agent``, ``sidecar.core``, ...); each module at
the root is a node of its own (``sidecar.app``, ``sidecar.wiring``; ``sidecar`` is ``__init__``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "sidecar"
ROOT_MODULES = {"__init__.py", "__main__.py", "app.py", "wiring.py"}
CLI = "sidecar.cli."


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, dotted
    target: str  # the imported module, dotted
    name: str | None  # the imported name (``from target import name``), or None for ``import target``
    where: str  # file:line

    @property
    def private(self) -> bool:
        parts = [*self.target.split("."), *([self.name] if self.name else [])]
        return any(p.startswith("_") and not p.startswith("__") for p in parts)


def module_name(path: Path, root: Path) -> str:
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def node_of(module: str) -> str:
    """``sidecar.agent.tools.registry`` → ``sidecar.agent``; ``sidecar.app`` → itself; ``sidecar`` → itself."""
    return ".".join(module.split(".")[:2])


def imports(root: Path) -> list[Import]:
    """Every import of a ``root.*`` module by a module under ``root`` (anywhere in the file: top, function, class)."""
    found: list[Import] = []
    for path in sorted(root.rglob("*.py")):
        source = module_name(path, root)
        package = source.split(".") if path.name == "__init__.py" else source.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
            where = f"{path.relative_to(root.parent)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Import):
                found += [Import(source, a.name, None, where) for a in node.names if a.name.split(".")[0] == root.name]
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                target = ".".join([*base, *([node.module] if node.module else [])])
                if target.split(".")[0] != root.name:
                    continue
                for alias in node.names:
                    submodule = root.parent.joinpath(*target.split("."), alias.name)
                    if submodule.is_dir() or submodule.with_suffix(".py").is_file():  # ``from pkg import module``
                        found.append(Import(source, f"{target}.{alias.name}", None, where))
                    else:
                        found.append(Import(source, target, alias.name, where))
    return found


def folder_cycles(found: list[Import]) -> list[list[str]]:
    """The strongly connected groups (size > 1) of the folder-level import graph, each sorted."""
    graph: dict[str, set[str]] = {}
    for imp in found:
        a, b = node_of(imp.source), node_of(imp.target)
        graph.setdefault(a, set())
        graph.setdefault(b, set())
        if a != b:
            graph[a].add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group: list[str] = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def cross_package_private(found: list[Import]) -> list[Import]:
    return [imp for imp in found if imp.private and node_of(imp.source) != node_of(imp.target)]


def _explain(found: list[Import], group: list[str]) -> str:
    between = [i for i in found if node_of(i.source) in group and node_of(i.target) in group]
    return "\n".join(f"  {i.where}: {i.source} → {i.target}" for i in between if node_of(i.source) != node_of(i.target))


# --- the rules on sidecar/ -----------------------------------------------------------------------------------------


def test_no_import_loops_between_folders() -> None:
    found = imports(ROOT)
    cycles = folder_cycles(found)
    assert not cycles, "folders that import each other:\n" + "\n".join(
        f"{' ↔ '.join(g)}\n{_explain(found, g)}" for g in cycles
    )


def test_no_private_name_is_imported_from_another_package() -> None:
    bad = cross_package_private(imports(ROOT))
    assert not bad, "private imports across packages:\n" + "\n".join(
        f"  {i.where}: {i.target}" + (f" import {i.name}" if i.name else "") for i in bad
    )


def test_the_root_holds_the_entry_points_only() -> None:
    assert {p.name for p in ROOT.glob("*.py")} == ROOT_MODULES


def test_the_clis_build_services_through_the_composition_root_only() -> None:
    """A CLI reaches the domains for models and helpers, never for a service class it would assemble itself (its own
    helpers in sidecar/cli, such as the demo's client of the wire, are not domain services)."""
    builders = ("Service", "Manager", "Supervisor", "Database", "Log", "Client")
    built = [
        i
        for i in imports(ROOT)
        if i.source.startswith(CLI) and not i.target.startswith(CLI) and (i.name or "").endswith(builders)
    ]
    assert not built, [f"{i.where}: {i.target} import {i.name}" for i in built]


# --- the checks can fail -------------------------------------------------------------------------------------------


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / "sidecar" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
    return root / "sidecar"


def test_a_loop_through_a_lazy_import_is_found(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "a/__init__.py": "",
            "a/x.py": "from ..b.y import thing\n",
            "b/__init__.py": "",
            "b/y.py": "thing = 1\ndef later():\n    from sidecar.c import z\n",
            "c/__init__.py": "",
            "c/z.py": "from sidecar.a import x\n",
            "d/__init__.py": "from sidecar import a\n",
        },
    )
    assert folder_cycles(imports(root)) == [["sidecar.a", "sidecar.b", "sidecar.c"]]


def test_a_private_import_from_another_package_is_found(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "a/__init__.py": "",
            "a/x.py": "def _helper(): ...\n",
            "a/_impl.py": "",
            "a/own.py": "from .x import _helper\nfrom . import _impl\n",  # inside its package: fine
            "b/__init__.py": "",
            "b/y.py": "def f():\n    from sidecar.a.x import _helper\n",
            "b/z.py": "from sidecar.a import _impl\n",
            "b/w.py": "from sidecar import __version__\n",  # dunder: public
        },
    )
    bad = cross_package_private(imports(root))
    assert [(i.source, i.target, i.name) for i in bad] == [
        ("sidecar.b.y", "sidecar.a.x", "_helper"),
        ("sidecar.b.z", "sidecar.a._impl", None),
    ]


def _module_bindings(tree: ast.Module) -> list[tuple[str, int]]:
    """The names a module binds at its top level: assigned constants, functions and classes, each with its line."""
    out: list[tuple[str, int]] = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            out += [(t.id, node.lineno) for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out.append((node.target.id, node.lineno))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append((node.name, node.lineno))
    return out


def test_no_module_binds_a_top_level_name_twice() -> None:
    """A second ``_QUOTED`` or ``_choices`` in a module of hundreds of rules silently replaces the first for every
    caller (twice in issue 32's sessions: a file-name reader and a number's choices broke); ruff's F811 does not see
    a constant rebound. A name bound under ``if TYPE_CHECKING`` or in a ``try`` is not counted."""
    twice = []
    for path in sorted(ROOT.rglob("*.py")):
        seen: dict[str, int] = {}
        for name, line in _module_bindings(ast.parse(path.read_text(encoding="utf-8"))):
            if name in seen and name != "__all__":
                twice.append(f"{path.relative_to(ROOT.parent)}:{line} {name} (first at {seen[name]})")
            seen.setdefault(name, line)
    assert not twice, "\n".join(twice)


def test_a_name_bound_twice_is_found() -> None:
    tree = ast.parse("_QUOTED = 1\ndef f(): pass\n_QUOTED = 2\n")
    assert [n for n, _ in _module_bindings(tree)].count("_QUOTED") == 2
