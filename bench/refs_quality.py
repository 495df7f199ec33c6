"""How right are codechunkd's references? Measured against jedi on installed packages.

    PYTHONPATH=src .venv/bin/python bench/refs_quality.py                   # click + requests
    PYTHONPATH=src .venv/bin/python bench/refs_quality.py --packages click --functions 20

For each package (real code nobody here wrote: the venv's site-packages), every file is
chunked as the indexer chunks it and its reference rows made as the store makes them
(``chunking/references.py``, ``storage/references.py``); the graph resolves them as an
index does (``storage/refgraph.py``). Then, for ``--functions`` functions and methods
drawn at random (seed 31) from each package's definitions (dunder methods left out: they
are called by syntax, not by name), the uses codechunkd reports (the lines of every
reference resolving to the function) are compared with the lines of jedi's
``get_references(scope="project")`` inside the package, definitions left out on both
sides (jedi counts an import as a definition: codechunkd's import rows are left out). Printed: precision and recall of the ``exact`` + ``imported`` answers, and
separately of the ``by-name`` answers, micro-averaged over (file, line) pairs.

jedi is a dev-only dependency (the ``dev`` extra).
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

SITE = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
SITE = SITE / "site-packages"


def build_graph(root: Path, package: str) -> Any:
    """The reference graph of one package, made as the indexer makes it (no LanceDB)."""
    from datetime import UTC, datetime

    from codechunkd.chunking.chunker import chunk
    from codechunkd.storage.references import reference_rows
    from codechunkd.storage.refgraph import COLUMNS, RefGraph
    from codechunkd.storage.rows import row_id

    files = []
    for path in sorted((root / package).rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        chunks = chunk(rel, path.read_bytes())
        files.append(
            SimpleNamespace(
                path=rel, blob="0" * 40, chunks=[SimpleNamespace(chunk=c) for c in chunks]
            )
        )
    source = SimpleNamespace(id="bench")
    head = SimpleNamespace(branch="main", commit=None)
    table = reference_rows(source, head, files, datetime.now(UTC), row_id)  # type: ignore[arg-type]
    kinds = {c.id: c.kind for f in files for e in f.chunks for c in [e.chunk]}
    graph = RefGraph(1, {c: table.column(c).to_pylist() for c in COLUMNS})
    return graph, {row_id("bench", k): v for k, v in kinds.items()}


def sample(graph: Any, kinds: dict[str, str], n: int, rng: random.Random) -> list[Any]:
    defs = []
    for rows in graph.defs_by_name.values():
        for i in rows:
            d = graph.definition(i)
            short = d.symbol.rsplit(".", 1)[-1]
            if kinds.get(d.chunk_id) in {"function", "method"} and not short.startswith("__"):
                defs.append(d)
    defs.sort(key=lambda d: (d.path, d.line, d.symbol))
    return rng.sample(defs, min(n, len(defs)))


def jedi_lines(root: Path, package: str, d: Any, project: Any) -> set[tuple[str, int]] | None:
    """(path, line) of jedi's references to ``d`` inside the package, definitions left out."""
    import jedi

    path = root / d.path
    short = d.symbol.rsplit(".", 1)[-1]
    lines = path.read_text().splitlines()
    for no in range(d.line, min(d.line + 30, len(lines)) + 1):
        m = re.search(rf"\bdef\s+({re.escape(short)})\b", lines[no - 1])
        if m:
            break
    else:
        return None
    script = jedi.Script(path=str(path), project=project)
    found = set()
    for r in script.get_references(no, m.start(1), scope="project"):
        if r.module_path is None or r.is_definition():
            continue
        rel = Path(r.module_path).resolve().relative_to(root.resolve()).as_posix()
        if rel.startswith(package + "/"):
            found.add((rel, r.line))
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--packages", nargs="+", default=["click", "requests"], help="names, or name,name,..."
    )
    ap.add_argument("--functions", type=int, default=50, help="per package (default 50)")
    ap.add_argument("--root", type=Path, default=SITE)
    args = ap.parse_args()
    args.packages = [p for arg in args.packages for p in arg.split(",") if p]
    missing = [p for p in args.packages if not (args.root / p).is_dir()]
    if missing:
        ap.error(f"no package folder under {args.root}: {', '.join(missing)}")
    import jedi

    totals = {"sure": [0, 0, 0], "by-name": [0, 0, 0]}  # right, reported, jedi's
    started = time.monotonic()
    done = 0
    for package in args.packages:
        graph, kinds = build_graph(args.root, package)
        project = jedi.Project(
            path=str(args.root / package), added_sys_path=[str(args.root)], smart_sys_path=False
        )
        rng = random.Random(31)
        for d in sample(graph, kinds, args.functions, rng):
            truth = jedi_lines(args.root, package, d, project)
            if truth is None:
                continue
            done += 1
            uses = [u for u in graph.uses_of([d]) if u.kind != "import"]  # jedi: definitions
            sure = {(u.path, u.line) for u in uses if u.how in ("exact", "imported")}
            guess = {(u.path, u.line) for u in uses if u.how == "by-name"} - sure
            for key, got in (("sure", sure), ("by-name", guess)):
                t = totals[key]
                t[0] += len(got & truth)
                t[1] += len(got)
            totals["sure"][2] += len(truth)
            totals["by-name"][2] += len(truth - sure)
    print(f"{done} functions of {', '.join(args.packages)} in {time.monotonic() - started:.0f} s")
    for key, (right, reported, truth) in totals.items():
        p = right / reported if reported else float("nan")
        r = right / truth if truth else float("nan")
        label = "exact+imported" if key == "sure" else "by-name (of jedi's not found above)"
        print(
            f"{label:<38} precision {p:.3f} ({right}/{reported})  recall {r:.3f} ({right}/{truth})"
        )


if __name__ == "__main__":
    main()
