"""Imports point one way: config -> indexer -> storage -> daemon -> cli (DESIGN.md)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).parents[1] / "src" / "codechunkd"
ORDER = ["config", "indexer", "storage", "daemon", "cli"]


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "codechunkd" or len(parts) < 2:
        return None
    return ORDER.index(parts[1]) if parts[1] in ORDER else None


def test_no_stage_imports_a_later_stage() -> None:
    upward = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC.parent).with_suffix("")
        own = _layer(".".join(rel.parts))
        if own is None:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                target = _layer(name)
                if target is not None and target > own:
                    upward.append(f"{rel}: imports {name}")
    assert not upward, upward
