"""Seeding (``index.seed``): vectors come from another index, only the local delta is embedded.

A seed index is built from a repository of real code (standard-library modules); a
clone one commit ahead is indexed with it. Only chunks whose text the seed lacks are
embedded, search is identical to an index built from scratch, and a seed that cannot
serve (missing, another model, an older schema, on a real S3 server) is handled.
"""

from __future__ import annotations

import shutil
import sysconfig
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest
from tests.conftest import GIT_ENV, Indexer, Repo, S3Server

from codechunkd.config import Settings, load_settings
from codechunkd.pipeline.report import SyncReport
from codechunkd.storage import schema as S
from codechunkd.storage.reader import Index
from codechunkd.storage.search import Mode
from codechunkd.storage.store import IndexStore

STDLIB = Path(sysconfig.get_paths()["stdlib"])
FILES = ["fnmatch.py", "bisect.py", "colorsys.py"]
UNCHANGED = {"fnmatch.py", "bisect.py"}
QUERIES = [
    "translate a shell wildcard pattern into a regular expression",
    "insert an item into a sorted list keeping it sorted",
    "convert a colour from RGB to HSV",
    "fnmatchcase",
    "clamp a value between two bounds",
]


@dataclass
class Scenario:
    seed_dir: Path
    seed_hashes: set[str]
    clone: Path
    seeded: Indexer
    report: SyncReport
    scratch: Indexer
    scratch_report: SyncReport


def _settings(index: Path, **overrides: object) -> Settings:
    return load_settings(env={}, overrides={"index.dir": str(index), **overrides})


def _hashes(store: IndexStore) -> set[str]:
    return set(store.scan_chunks(None, ["embed_hash"]).column("embed_hash").to_pylist())


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory, embedder) -> Iterator[Scenario]:  # type: ignore[no-untyped-def]
    """A seed index of ``main``; a clone one commit ahead, indexed with the seed and without."""
    root = tmp_path_factory.mktemp("seed")
    with pytest.MonkeyPatch.context() as mp:
        for k, v in GIT_ENV.items():
            mp.setenv(k, v)
        origin = Repo(root / "origin")
        for name in FILES:
            shutil.copyfile(STDLIB / name, origin.path / name)
        origin.commit("stdlib sample")
        seed = Indexer(_settings(root / "seed"), embedder)
        seed.sync(origin.path)
        seed.close()
        origin.git("clone", "-q", str(origin.path), str(root / "clone"))
        clone = Repo(root / "clone")  # `git init` in a clone changes nothing
        text = (clone.path / "colorsys.py").read_text()
        clone.write("colorsys.py", text.replace("ONE_THIRD = 1.0/3.0", "ONE_THIRD = 1/3"))
        clone.write("clamp.py", "def clamp(x, lo, hi):\n    return max(lo, min(hi, x))\n")
        clone.commit("one commit ahead")
    seeded = Indexer(_settings(root / "seeded", **{"index.seed": str(root / "seed")}), embedder)
    report = seeded.sync(clone.path)
    scratch = Indexer(_settings(root / "scratch"), embedder)
    scratch_report = scratch.sync(clone.path)
    yield Scenario(
        seed_dir=root / "seed",
        seed_hashes=_hashes(seed.store),
        clone=clone.path,
        seeded=seeded,
        report=report,
        scratch=scratch,
        scratch_report=scratch_report,
    )
    seeded.close()
    scratch.close()


def test_clone_embeds_only_text_the_seed_lacks(scenario: Scenario) -> None:
    """Chunks whose text is in the seed are taken from it (0 embedded for unchanged files);
    only the new text is embedded, and the report counts both."""
    r = scenario.report
    rows = scenario.seeded.store.scan_chunks(None, ["path", "embed_hash"]).to_pylist()
    new = {row["embed_hash"] for row in rows} - scenario.seed_hashes
    assert r.seed_skipped is None
    assert 0 < len(new) < len(rows)
    assert len(new) == r.embedded
    assert sum(row["embed_hash"] not in new for row in rows) == r.seeded
    assert r.seeded + r.embedded + r.reused == r.chunks == len(rows)
    assert all(
        row["embed_hash"] in scenario.seed_hashes for row in rows if row["path"] in UNCHANGED
    )
    assert {row["path"] for row in rows if row["embed_hash"] in new} <= {"colorsys.py", "clamp.py"}
    assert scenario.scratch_report.seeded == 0
    assert scenario.scratch_report.embedded == len({row["embed_hash"] for row in rows})


def test_seeded_search_is_identical_to_scratch(scenario: Scenario, embedder) -> None:  # type: ignore[no-untyped-def]
    """The seeded index answers every query with the same ids in the same order as an index
    of the same clone built from scratch (its vectors are the same vectors)."""
    seeded = Index(scenario.seeded.store, scenario.seeded.syncer.settings, embedder)
    scratch = Index(scenario.scratch.store, scenario.scratch.syncer.settings, embedder)
    for query in QUERIES:
        for mode in (Mode.HYBRID, Mode.VECTOR):
            got = [h.id for h in seeded.search(query, k=8, mode=mode)]
            want = [h.id for h in scratch.search(query, k=8, mode=mode)]
            assert want, query
            assert want == got, (query, mode)


def _older_schema(path: Path) -> None:
    """A real LanceDB ``chunks`` table stamped with schema version 0."""
    from codechunkd.storage._lancedb import import_lancedb

    schema = S.chunks_schema(384, "sentence-transformers/all-MiniLM-L6-v2")
    meta = {**(schema.metadata or {}), S.META_VERSION: b"0"}
    import_lancedb().connect(str(path)).create_table(
        S.CHUNKS, schema=pa.schema(schema, metadata=meta)
    )


def _other_model(path: Path) -> None:
    """A real index (empty) whose vectors are another model's."""
    IndexStore(str(path)).ensure_writable("acme/other-model", 384)


def _seed_table(path: Path, schema: pa.Schema) -> None:
    from codechunkd.storage._lancedb import import_lancedb

    import_lancedb().connect(str(path)).create_table(S.CHUNKS, schema=schema)


def _version_not_a_number(path: Path) -> None:
    """A ``chunks`` table whose schema version is not an integer."""
    schema = S.chunks_schema(384, "sentence-transformers/all-MiniLM-L6-v2")
    _seed_table(
        path, pa.schema(schema, metadata={**(schema.metadata or {}), S.META_VERSION: b"1a"})
    )


def _missing_columns(path: Path) -> None:
    """Schema version 1, without the summary columns a lookup reads."""
    schema = S.chunks_schema(384, "sentence-transformers/all-MiniLM-L6-v2")
    keep = [f for f in schema if f.name not in ("summary", "summary_of")]
    _seed_table(path, pa.schema(keep, metadata=schema.metadata))


def _vector_of_strings(path: Path) -> None:
    """Schema version 1 whose ``vector`` column is not a list of floats."""
    schema = S.chunks_schema(384, "sentence-transformers/all-MiniLM-L6-v2")
    fields = [pa.field("vector", pa.string()) if f.name == "vector" else f for f in schema]
    _seed_table(path, pa.schema(fields, metadata=schema.metadata))


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (None, "no index at"),
        (_other_model, "acme/other-model"),
        (_older_schema, "schema version 0"),
        (_version_not_a_number, "schema version '1a', which is not a number"),
        (_missing_columns, "lacks its columns summary_of, summary"),
        (_vector_of_strings, "vector column of type string"),
    ],
)
def test_unusable_seed_is_reported_and_skipped(  # type: ignore[no-untyped-def]
    make, reason: str, repo: Repo, tmp_path: Path, embedder
) -> None:
    """A missing, other-model or older-schema seed, or one whose schema version is not a
    number, that lacks columns or whose vectors are not floats, is reported in the sync report
    (saying what is wrong) and skipped: every chunk is embedded here and the missing path is
    not created."""
    seed = tmp_path / "seed"
    if make is not None:
        make(seed)
    repo.write("a.py", "def add(a, b):\n    return a + b\n\n\ndef neg(a):\n    return -a\n")
    repo.commit()
    ix = Indexer(_settings(tmp_path / "index", **{"index.seed": str(seed)}), embedder)
    try:
        report = ix.sync(repo.path)
    finally:
        ix.close()
    assert report.seed_skipped is not None and reason in report.seed_skipped
    assert report.as_dict()["seed_skipped"] == report.seed_skipped
    assert (0, report.chunks) == (report.seeded, report.embedded + report.reused)
    assert report.embedded > 0
    assert make is not None or not seed.exists()


@pytest.mark.slow
def test_seed_on_a_real_s3_server(  # type: ignore[no-untyped-def]
    s3_server: S3Server, monkeypatch: pytest.MonkeyPatch, repo: Repo, tmp_path: Path, embedder
) -> None:
    """A seed on S3 (SeaweedFS on 127.0.0.1), reached with the object_store settings:
    a second index of the same content embeds nothing."""
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    prefix = f"seed-{uuid.uuid4().hex[:10]}"
    repo.write("a.py", "def add(a, b):\n    return a + b\n\n\ndef neg(a):\n    return -a\n")
    repo.commit()
    ci = Indexer(s3_server.settings(prefix), embedder)
    try:
        ci.sync(repo.path)
    finally:
        ci.close()
    laptop_settings = s3_server.settings(
        prefix, **{"index.dir": str(tmp_path / "local"), "index.seed": f"s3://idx/{prefix}"}
    )
    laptop = Indexer(laptop_settings, embedder)
    try:
        report = laptop.sync(repo.path)
    finally:
        laptop.close()
    assert report.seed_skipped is None
    assert (report.embedded, report.seeded) == (0, report.chunks)
    assert report.chunks > 0


def test_index_command_takes_seed_flag(scenario: Scenario, tmp_path: Path) -> None:
    """`codechunkd index --seed DIR` (a real child process) seeds as the setting does and
    prints how many chunks came from the seed."""
    import subprocess
    import sys

    exe = str(Path(sys.executable).parent / "codechunkd")
    cmd = [exe, "index", str(scenario.clone), "--index-dir", str(tmp_path / "ix")]
    out = subprocess.run(
        [*cmd, "--seed", str(scenario.seed_dir)], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert f"{scenario.report.seeded} from the seed" in out.stdout
    assert f"{scenario.report.embedded} embedded" in out.stdout


# -- issue #28 item 3: a seed's vectors are checked before the cache keeps them ---------


def _poison(seed: Path, value: float) -> int:
    """Every vector of the seed's ``chunks`` set to ``value`` (NaN or 0.0), written with
    Lance itself (LanceDB refuses to write a NaN); returns the rows."""
    import lance
    import numpy as np

    uri = str(seed / f"{S.CHUNKS}.lance")
    ds = lance.dataset(uri)
    table = ds.to_table()
    field = ds.schema.field("vector")
    dim = field.type.list_size
    values = pa.array(np.full(table.num_rows * dim, value, dtype=np.float32))
    table = table.set_column(
        table.schema.get_field_index("vector"),
        field,
        pa.FixedSizeListArray.from_arrays(values, dim),
    )
    lance.write_dataset(table.replace_schema_metadata(ds.schema.metadata), uri, mode="overwrite")
    return int(table.num_rows)


@pytest.mark.parametrize("value", [float("nan"), 0.0], ids=["nan", "zeros"])
def test_unusable_seed_vectors_are_refused_and_counted(  # type: ignore[no-untyped-def]
    value: float, repo: Repo, tmp_path: Path, embedder
) -> None:
    """A seed of the right model and dimension whose vectors are NaN or all zeros: each is
    refused before the cache keeps it (`seed_refused`), its chunk is embedded here, the index
    is written, and a later `--rebuild`-style sync without the seed reuses only good vectors."""
    repo.write("a.py", "def add(a, b):\n    return a + b\n\n\ndef neg(a):\n    return -a\n")
    repo.commit()
    seed = Indexer(_settings(tmp_path / "seed"), embedder)
    try:
        seed.sync(repo.path)
    finally:
        seed.close()
    rows = _poison(tmp_path / "seed", value)

    ix = Indexer(_settings(tmp_path / "index", **{"index.seed": str(tmp_path / "seed")}), embedder)
    try:
        report = ix.sync(repo.path)
        assert (report.seeded, report.seed_refused) == (0, rows)
        assert report.embedded == report.chunks == rows
        assert report.seed_skipped is None and report.as_dict()["seed_refused"] == rows
        ix.store.remove_source(ix.syncer.store.states()[0].source.id)
        again = ix.sync(repo.path)
        assert (again.reused, again.embedded) == (again.chunks, 0)  # the good ones, cached
        from codechunkd.git.changes import GitSource

        assert ix.store.unusable_vectors(GitSource(repo.path).source.id) == 0
    finally:
        ix.close()


@pytest.mark.slow
def test_rebuild_recovers_from_unusable_vectors_in_the_cache_and_the_table(
    repo: Repo, tmp_path: Path
) -> None:
    """What a poisoned seed left behind before vectors were checked: NaN vectors in
    `cache.sqlite` and all-zero vectors in the table. `verify` reports the zero rows (exit 1),
    and `index --rebuild` embeds every chunk again instead of failing on the cached NaNs
    (exit 4 before), after which `verify` is clean and vector search finds the code."""
    import json
    import sqlite3
    import subprocess
    import sys

    import numpy as np

    exe = str(Path(sys.executable).parent / "codechunkd")
    ix = tmp_path / "ix"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [exe, *args, "--index-dir", str(ix)], capture_output=True, text=True, check=False
        )
        assert "Traceback" not in done.stderr, done.stderr
        return done

    repo.write("a.py", "def add(a, b):\n    return a + b\n\n\ndef neg(a):\n    return -a\n")
    repo.commit()
    assert run("index", str(repo.path)).returncode == 0
    rows = _poison(ix, 0.0)
    db = sqlite3.connect(ix / "_codechunkd" / "cache.sqlite")
    with db:
        db.execute(
            "UPDATE embeddings SET vector = ?", (np.full(384, np.nan, np.float32).tobytes(),)
        )
    db.close()

    checked = run("verify", str(repo.path), "--json")
    assert checked.returncode == 1 and json.loads(checked.stdout)["unusable_vectors"] == rows

    rebuilt = run("index", str(repo.path), "--rebuild", "--json")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert json.loads(rebuilt.stdout)["embedded"] == rows
    checked = run("verify", str(repo.path), "--json")
    assert checked.returncode == 0 and json.loads(checked.stdout)["unusable_vectors"] == 0
    found = run("search", "add two numbers", "--mode", "vector", "--json")
    assert found.returncode == 0 and json.loads(found.stdout), found.stderr
