"""Imports point one way (DESIGN.md), and no package imports itself in a circle.

cli -> daemon -> pipeline -> storage -> {git, chunking, embedding, llm} -> config.
The four stage packages share a rank; among them only the edges in STAGE_EDGES are
allowed (the token counter reads the embedding model's tokenizer; extractive
summaries read chunks).  The modules at the top of the package (errors, types,
heap, logs, httpclient, platform, atomicfile, regularfile, procs, display) sit below everything and
import no layer.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).parents[1] / "src" / "codechunkd"
RANK = {
    "config": 0,
    "git": 1,
    "chunking": 1,
    "embedding": 1,
    "llm": 1,
    "storage": 2,
    "pipeline": 3,
    "daemon": 4,
    "cli": 5,
    "mcp_server": 5,
}
BASE = {
    "errors",
    "types",
    "heap",
    "logs",
    "httpclient",
    "platform",
    "atomicfile",
    "regularfile",
    "procs",
    "display",
}
STAGE_EDGES = {
    ("chunking", "embedding"),
    ("llm", "chunking"),
    ("cli", "mcp_server"),
}


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(module, at top level) for every codechunkd import in a file."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
            if node.module == "codechunkd":
                names = [f"codechunkd.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found += [(n, id(node) in top) for n in names if n.startswith("codechunkd.")]
    return found


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def test_no_stage_imports_a_later_stage() -> None:
    """Every import goes down the ranks, or along an allowed edge between stage packages."""
    wrong = []
    for module, path in _modules().items():
        parts = module.split(".")
        if len(parts) < 2:
            continue
        own = parts[1]
        for name, _ in _imports(path):
            target = name.split(".")[1]
            if target == own:
                continue
            if own in BASE:
                if target not in BASE:
                    wrong.append(f"{module}: a base module imports {name}")
                continue
            if target in BASE or own not in RANK or target not in RANK:
                continue
            if RANK[target] > RANK[own] or (
                RANK[target] == RANK[own] and (own, target) not in STAGE_EDGES
            ):
                wrong.append(f"{module}: imports {name}")
    assert not wrong, wrong


def test_no_circle_of_imports_inside_a_package() -> None:
    """No cycle, lazy imports included: a cycle means the cut between modules is wrong."""
    modules = _modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in modules.items():
        for name, _ in _imports(path):
            if name in modules and name != module:
                graph[module].add(name)
    cycles = []
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for module in sorted(modules):
        if module not in state:
            visit(module, [module])
    assert not cycles, cycles


def test_the_layers_are_the_packages_on_disk() -> None:
    """A new package gets a rank here, so the first test cannot miss it."""
    packages = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages == set(RANK)


MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
TOO_BIG: dict[str, str] = {}
"""Modules or functions (``path`` or ``path:qualified.name``) allowed over the limits, each
with the reason beside it.  None today."""


def _functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, int]]:
    """(qualified name, lines) of every function and method, nested ones included."""
    out = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = f"{prefix}{node.name}"
            if not isinstance(node, ast.ClassDef):
                out.append((name, (node.end_lineno or node.lineno) - node.lineno + 1))
            out += _functions(node, f"{name}.")
        else:
            out += _functions(node, prefix)
    return out


def test_no_module_over_600_lines_and_no_function_over_80() -> None:
    """One concern per module: a module over 600 lines or a function over 80 holds more than
    a newcomer can keep in mind at once (#34)."""
    over = []
    for path in sorted(SRC.rglob("*.py")):
        rel = str(path.relative_to(SRC))
        text = path.read_text()
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES and rel not in TOO_BIG:
            over.append(f"{rel}: {lines} lines")
        for name, n in _functions(ast.parse(text)):
            if n > MAX_FUNCTION_LINES and f"{rel}:{name}" not in TOO_BIG:
                over.append(f"{rel}:{name}: {n} lines")
    assert not over, over
