"""``file_vector`` (opt-in, storage/file_vectors.py): the candidates' files ranked by their
whole meaning (the centroid of their chunks' vectors), fused into each file's best chunk,
on a real index with the real model."""

from __future__ import annotations

import numpy as np
import pytest
from tests.conftest import index_of

from codechunkd.storage.file_vectors import FILE_K, FILE_WEIGHT, FileVectors
from codechunkd.storage.reader import Index

# a file about one thing, in several small functions
SPREADSHEET = """\
def read_spreadsheet_rows(stream):
    \"\"\"Yield each row of a comma-separated spreadsheet export as a dict.\"\"\"
    header = next(stream).split(",")
    for line in stream:
        yield dict(zip(header, line.split(",")))


def column_totals(rows):
    \"\"\"Sum every numeric column of the spreadsheet rows.\"\"\"
    totals = {}
    for row in rows:
        for key, value in row.items():
            totals[key] = totals.get(key, 0.0) + float(value or 0)
    return totals


def write_spreadsheet(rows, out):
    \"\"\"Write rows back out as comma-separated values with a header line.\"\"\"
    keys = list(rows[0])
    out.write(",".join(keys) + "\\n")
    for row in rows:
        out.write(",".join(str(row[k]) for k in keys) + "\\n")
"""

# a file about something else, with one function that says the query's words
HUB = (
    "".join(
        f"""
def render_widget_{n}(screen):
    \"\"\"Draw widget {n} of the dashboard on the screen, with its border and its title.\"\"\"
    screen.draw_box(WIDGETS[{n}].area, border=True)
    screen.draw_text(WIDGETS[{n}].title)
"""
        for n in range(12)
    )
    + """
def export_widget_rows_to_a_spreadsheet(widgets, out):
    \"\"\"Export the rows of each widget to a comma-separated spreadsheet, one row a line.\"\"\"
    for w in widgets:
        out.write(",".join(str(cell) for cell in w.rows) + "\\n")
"""
)


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory, embedder) -> Index:  # type: ignore[no-untyped-def]
    return index_of(
        tmp_path_factory.mktemp("files"),
        {
            "data/sheets.py": SPREADSHEET,
            "ui/dashboard.py": HUB,
        },
        embedder,
    )


QUERY = "export rows to a comma-separated spreadsheet"


ON = ["file_vector"]


def test_a_files_best_chunk_gains_its_files_rank_by_the_files_centroid(index: Index) -> None:
    """With the rule, the best chunk of each file gains ``FILE_WEIGHT * (FILE_K + 1) /
    (FILE_K + rank + 1)``, the rank being its file's among the candidates' files by the
    cosine of the query to the normalized mean of the file's chunk vectors (computed here
    from the table); the file's other chunks keep their scores."""
    on = index.search(QUERY, k=30, disable=["file_saturation", "file_coherence"], enable=ON)
    off = index.search(QUERY, k=30, disable=["file_saturation", "file_coherence"])
    assert {h.id for h in on} == {h.id for h in off}
    before = {h.id: h.score for h in off}
    gains: dict[str, list[float]] = {}
    for h in sorted(off, key=lambda h: -h.score):
        after = next(x.score for x in on if x.id == h.id)
        gains.setdefault(h.path, []).append(round(after - before[h.id], 4))
    gained = {}
    for path, g in gains.items():
        assert g[0] > 0 and all(x == 0 for x in g[1:]), (path, g)  # the best chunk alone
        gained[path] = {g[0]}
    rows = index.store.select("synthetic = false", ["path", "vector"])
    q = index.embedder.embed([QUERY])[0]
    cos = {}
    for path in gained:
        mean = np.mean([r["vector"] for r in rows if r["path"] == path], axis=0)
        cos[path] = float(mean @ q / np.linalg.norm(mean) / np.linalg.norm(q))
    ranked = sorted(cos, key=lambda p: -cos[p])
    for rank, path in enumerate(ranked):
        (term,) = gained[path]
        assert term == pytest.approx(FILE_WEIGHT * (FILE_K + 1) / (FILE_K + rank + 1), abs=2e-4)


def test_the_file_about_the_question_gains_more_than_a_file_with_one_matching_chunk(
    index: Index,
) -> None:
    """The dashboard's one export function says the query's words best, so its chunk comes
    first; the spreadsheet module is about the question as a whole, so its file ranks first
    by meaning and its chunks gain the larger term."""
    on = index.search(QUERY, k=30, disable=["file_saturation", "file_coherence"], enable=ON)
    off = index.search(QUERY, k=30, disable=["file_saturation", "file_coherence"])
    assert off[0].path == "ui/dashboard.py", [h.path for h in off]  # the setup
    before = {h.id: h.score for h in off}
    gain: dict[str, float] = {}
    for h in on:  # the file's best chunk gains, its others keep their scores
        gain[h.path] = max(gain.get(h.path, 0.0), h.score - before[h.id])
    assert gain["data/sheets.py"] > gain["ui/dashboard.py"] > 0, gain


def test_centroids_are_cached_by_blob_and_leave_out_chunks_without_vectors(index: Index) -> None:
    """A centroid is a function of the file's content: asked again, it is not read again;
    a blob no row has gets none."""
    files = FileVectors(index.store)
    blobs = sorted({r["blob"] for r in index.store.select(None, ["blob"])})
    first = files.centroids([*blobs, "0" * 40])
    assert set(first) == set(blobs)
    assert all(abs(float(np.linalg.norm(v)) - 1.0) < 1e-5 for v in first.values())
    files.store = None  # type: ignore[assignment]  # a second read would fail
    again = files.centroids(blobs)
    assert all(np.array_equal(again[b], first[b]) for b in blobs)
