"""docs/schema.md is the contract readers rely on: it must match the code's tables."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa

from codechunkd.storage import schema as S

DOC = Path(__file__).parents[2] / "docs" / "schema.md"


def _documented() -> dict[str, dict[str, str]]:
    tables: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in DOC.read_text().splitlines():
        heading = re.match(r"^## `(\w+)`", line)
        if heading:
            current = tables.setdefault(heading.group(1), {})
            continue
        row = re.match(r"^\| `(\w+)` \| ([^|]+) \|", line)
        if row and current is not None:
            current[row.group(1)] = row.group(2).strip()
    return tables


def _doc_type(t: pa.DataType) -> str:
    if pa.types.is_fixed_size_list(t):
        return "fixed_size_list<float32>[dim]" if t.value_type == pa.float32() else str(t)
    if pa.types.is_timestamp(t):
        return f"timestamp[{t.unit}, {t.tz}]"
    return {"large_string": "string"}.get(str(t), str(t))


def test_every_column_is_documented_with_its_type() -> None:
    """docs/schema.md documents every column of every table with its type, and no other."""
    doc = _documented()
    code = {
        S.CHUNKS: S.chunks_schema(384, "m"),
        S.FILES: S.FILES_SCHEMA,
        S.REPOS: S.REPOS_SCHEMA,
        S.REFERENCES: S.REFERENCES_SCHEMA,
    }
    assert set(doc) == set(code)
    for name, schema in code.items():
        assert {f.name: _doc_type(f.type) for f in schema} == doc[name], name


def test_schema_version_is_documented() -> None:
    """docs/schema.md states the schema version the code writes."""
    assert f"Schema version: **{S.SCHEMA_VERSION}**" in DOC.read_text()
