"""The order ``defs`` and the MCP ``definition`` tool give a name's definitions, on a real
index: by file and line, but an implementation before the overload stubs above it.

Real git repositories, a real LanceDB index and the real model (through ``Indexer``).
"""

from __future__ import annotations

from tests.conftest import Indexer, Repo
from tests.storage.test_references import index_of

from codechunkd.config import Settings

FIELDS = '''from typing import overload


@overload
def field(default: int) -> int: ...


@overload
def field(default: str) -> str: ...


def field(default):
    """Make a field."""
    return default


class Model:
    def copy(self):
        return self
'''
SHAPES = """export function area(r: number): number;
export function area(w: number, h: number): number;
export function area(a: number, b?: number): number {
  return b === undefined ? 3.14 * a * a : a * b
}
"""
OLD = """def field(default):
    return default
"""


def test_an_implementation_comes_before_its_overloads(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``defs field`` answers the implementation first (line 12, after two ``@overload``
    stubs), then the stubs, then another file's ``field``; a TypeScript function's
    implementation before its overload signatures; a name defined once keeps file order."""
    files = {"fields.py": FIELDS, "shapes.ts": SHAPES, "old/fields.py": OLD}
    index = index_of(repo, indexer, settings, files)
    found = [(d.path, d.line) for d in index.definitions("field")]
    assert found == [("fields.py", 12), ("fields.py", 4), ("fields.py", 8), ("old/fields.py", 1)]
    assert [d.line for d in index.definitions("area")] == [3, 1, 2]
    assert [(d.path, d.line) for d in index.definitions("Model.copy")] == [("fields.py", 18)]
