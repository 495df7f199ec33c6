"""The pipeline on real repositories: rows, idempotence, reuse, skips, git states."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.conftest import Indexer, Repo

from codechunkd.config import load_settings
from codechunkd.errors import ModelMismatch
from codechunkd.git.changes import GitSource
from codechunkd.pipeline.verify import verify

PY = '''"""Settings helpers."""

import os


def load_settings(path):
    """Read the settings file and apply environment overrides."""
    with open(path) as f:
        data = f.read()
    return data


class Store:
    """Keeps rows."""

    def put(self, row):
        """Store one row."""
        self.rows.append(row)

    def get(self, key):
        return self.rows[key]
'''

GO = """package main

// Add returns the sum of two integers.
func Add(a int, b int) int {
	return a + b
}
"""

MD = """# Title

Intro text.

## Install

Run make.
"""


def _snapshot(ix: Indexer) -> set[tuple[str, int, int, str]]:
    return {(r["path"], r["start_byte"], r["end_byte"], r["content_hash"]) for r in ix.rows()}


def test_index_writes_rows_for_every_language(repo: Repo, indexer: Indexer) -> None:
    """One sync writes unique rows for Python, Go and Markdown files, with their symbols,
    and records the commit as not pending."""
    repo.write("pkg/settings.py", PY)
    repo.write("main.go", GO)
    repo.write("README.md", MD)
    repo.commit()
    report = indexer.sync(repo.path)
    assert report.added == 3 and report.deleted == 0
    rows = indexer.rows()
    symbols = {r["symbol"] for r in rows}
    assert {"load_settings", "Store.put", "Add"} <= symbols
    assert {r["path"] for r in rows} == {"pkg/settings.py", "main.go", "README.md"}
    assert len({r["id"] for r in rows}) == len(rows)
    state = indexer.store.state(report_source(repo))
    assert state is not None and state.commit == repo.head() and state.pending is None


def report_source(repo: Repo) -> str:
    from codechunkd.git.changes import GitSource

    return GitSource(repo.path).source.id


def test_second_run_changes_nothing(repo: Repo, indexer: Indexer) -> None:
    """A second sync of an unchanged repository writes and embeds nothing."""
    repo.write("a.py", PY)
    repo.commit()
    indexer.sync(repo.path)
    before = sorted(r["id"] for r in indexer.rows())
    report = indexer.sync(repo.path)
    assert (report.added, report.changed, report.deleted, report.embedded) == (0, 0, 0, 0)
    assert report.unchanged == 1
    assert sorted(r["id"] for r in indexer.rows()) == before


def test_editing_one_function_embeds_only_that_chunk(repo: Repo, indexer: Indexer) -> None:
    """Editing one method re-embeds only its chunk (and its class header); the rest
    comes from the cache."""
    repo.write("a.py", PY)
    repo.commit()
    indexer.sync(repo.path)
    repo.write("a.py", PY.replace("return self.rows[key]", "return self.rows.get(key)"))
    report = indexer.sync(repo.path)
    assert report.changed == 1
    assert 1 <= report.embedded <= 2  # the method (and the class header that lists it)
    assert report.reused >= 3


def test_branch_switch_and_back_embeds_nothing_on_the_way_back(
    repo: Repo, indexer: Indexer
) -> None:
    """Switching branch and back embeds nothing on the way back, and the index then
    equals a fresh build."""
    repo.write("a.py", PY)
    repo.write("b.go", GO)
    repo.commit()
    indexer.sync(repo.path)
    repo.git("checkout", "-q", "-b", "feature")
    repo.write("a.py", PY.replace("Store", "Warehouse"))
    repo.remove("b.go")
    repo.write("c.md", MD)
    repo.commit()
    there = indexer.sync(repo.path)
    assert there.changed == 1 and there.deleted == 1 and there.added == 1
    repo.git("checkout", "-q", "main")
    back = indexer.sync(repo.path)
    assert back.embedded == 0
    assert back.reused > 0
    fresh = Indexer(
        load_settings(env={}, overrides={"index.dir": str(repo.path.parent / "fresh")}),
        indexer.syncer.embedder,
    )
    fresh.sync(repo.path)
    assert _snapshot(indexer) == _snapshot(fresh)
    fresh.close()


def test_uncommitted_edits_and_untracked_files_are_indexed(repo: Repo, indexer: Indexer) -> None:
    """An untracked file is indexed with its working-tree blob id, and dropped once deleted."""
    repo.write("a.py", PY)
    repo.commit()
    indexer.sync(repo.path)
    repo.write("new.py", "def fresh_function():\n    return 42\n")
    report = indexer.sync(repo.path)
    assert report.added == 1
    rows = [r for r in indexer.rows() if r["path"] == "new.py"]
    assert rows and rows[0]["blob"] == repo.git("hash-object", "new.py")
    repo.remove("new.py")
    assert indexer.sync(repo.path).deleted == 1
    assert not [r for r in indexer.rows() if r["path"] == "new.py"]


def test_skips_are_counted_with_reasons(repo: Repo, tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    """Binary, too large and symlinked files are counted skips; a Latin-1 file is
    decoded with replacement and indexed."""
    settings = load_settings(
        env={"CODECHUNKD_FILES_MAX_FILE_SIZE": "2000"},
        overrides={"index.dir": str(tmp_path / "ix")},
    )
    ix = Indexer(settings, embedder)
    repo.write("a.py", "x = 1\n")
    repo.write("img.png", b"\x89PNG\r\n\x1a\n\x00\x00binary")
    repo.write("big.txt", "word " * 1000)
    repo.write("latin1.txt", "caf\xe9\n".encode("latin-1"))
    os.symlink("a.py", repo.path / "link.py")
    repo.commit()
    report = ix.sync(repo.path)
    assert report.skipped == {"binary": 1, "too_large": 1, "symlink": 1}
    assert report.replaced_utf8 == 1
    assert {r["path"] for r in ix.rows()} == {"a.py", "latin1.txt"}
    ix.close()


def test_gitignore_change_moves_files_in_and_out(repo: Repo, indexer: Indexer) -> None:
    """Ignoring a file removes its rows; un-ignoring it brings them back."""
    repo.write("a.py", "a = 1\n")
    repo.write("gen.py", "g = 1\n")
    repo.write(".gitignore", "")
    repo.commit(add=False)  # nothing tracked: a.py and gen.py are untracked files
    indexer.sync(repo.path)
    assert {"a.py", "gen.py"} <= {r["path"] for r in indexer.rows()}
    repo.write(".gitignore", "gen.py\n")
    indexer.sync(repo.path)
    assert "gen.py" not in {r["path"] for r in indexer.rows()}
    repo.write(".gitignore", "")
    indexer.sync(repo.path)
    assert "gen.py" in {r["path"] for r in indexer.rows()}


def test_unborn_then_first_commit_then_detached(repo: Repo, indexer: Indexer) -> None:
    """An unborn branch is indexed, its first commit embeds nothing new, and a detached
    HEAD is indexed at its commit."""
    repo.write("a.py", PY)
    report = indexer.sync(repo.path)
    assert report.commit is None and report.added == 1
    c1 = repo.commit()
    report = indexer.sync(repo.path)
    assert report.commit == c1 and report.embedded == 0
    repo.write("a.py", PY + "\n\ndef extra():\n    return 1\n")
    repo.commit()
    repo.git("checkout", "-q", "--detach", c1)
    report = indexer.sync(repo.path)
    assert report.branch == "HEAD" and report.commit == c1


def test_interrupted_run_is_repaired(repo: Repo, indexer: Indexer) -> None:
    """A state left pending (a crash mid-apply) makes the next run reconcile everything."""
    repo.write("a.py", PY)
    repo.write("b.py", "b = 1\n")
    repo.commit()
    indexer.sync(repo.path)
    state = indexer.store.state(report_source(repo))
    assert state is not None
    # what a crash after writing b.py's deletion but before the state leaves behind
    from dataclasses import replace

    from codechunkd.git.changes import GitSource

    git = GitSource(repo.path)
    repo.remove("b.py")
    repo.write("c.py", "c = 1\n")
    indexer.store.put_state(replace(state, pending="x" * 40))
    head = git.head()
    indexer.store.write_batch(git.source, head, [], ["b.py"], model_id="")
    report = indexer.sync(repo.path)
    assert report.full
    assert {r["path"] for r in indexer.rows()} == {"a.py", "c.py"}
    assert indexer.store.state(git.source.id).pending is None  # type: ignore[union-attr]


def test_new_files_are_appended_but_orphan_rows_are_replaced(repo: Repo, indexer: Indexer) -> None:
    """New paths are appended (no merge); a path with rows but no ``files`` row is replaced."""
    from dataclasses import replace

    from codechunkd.git.changes import GitSource
    from codechunkd.storage import schema as S
    from codechunkd.storage.rows import quote

    repo.write("a.py", PY)
    repo.write("b.py", "def b(x):\n    return x\n")
    repo.commit()
    indexer.sync(repo.path)
    first = indexer.rows()
    assert len({r["id"] for r in first}) == len(first)
    # a crash after the chunks commit of b.py, before its files row and the state
    git = GitSource(repo.path)
    indexer.store._open(S.FILES).delete(f"path = {quote('b.py')}")
    state = indexer.store.state(git.source.id)
    assert state is not None
    indexer.store.put_state(replace(state, pending="x" * 40))
    report = indexer.sync(repo.path)
    assert report.full and report.added == 1  # b.py, which the manifest does not hold
    again = indexer.rows()
    assert sorted(r["id"] for r in again) == sorted(r["id"] for r in first)  # no duplicates
    assert set(indexer.store.manifest(git.source.id)) == {"a.py", "b.py"}


def test_other_model_is_a_clear_error(repo: Repo, indexer: Indexer, settings) -> None:  # type: ignore[no-untyped-def]
    """An index of one model refuses another model with a ModelMismatch naming it."""
    repo.write("a.py", "a = 1\n")
    repo.commit()
    indexer.sync(repo.path)
    with pytest.raises(ModelMismatch, match="all-MiniLM"):
        indexer.store.check_model("other-model", 768)


def test_many_small_batches_are_prepared_ahead_and_all_land(
    repo: Repo, tmp_path: Path, embedder
) -> None:  # type: ignore[no-untyped-def]
    """With batches of 2 files the reading/chunking thread runs ahead; every file lands once."""
    from codechunkd.git.changes import GitSource
    from codechunkd.pipeline.verify import verify

    settings = load_settings(
        env={"CODECHUNKD_INDEX_BATCH_FILES": "2"}, overrides={"index.dir": str(tmp_path / "ix")}
    )
    ix = Indexer(settings, embedder)
    for i in range(9):
        repo.write(f"m{i}.py", f"def f{i}(x):\n    return x + {i}\n")
    repo.commit()
    report = ix.sync(repo.path)
    assert report.added == 9 and report.chunks == len(ix.rows())
    assert verify(settings, ix.store, GitSource(repo.path)).ok
    ix.close()


def test_vector_index_is_built_once_due_and_new_rows_stay_searchable(
    repo: Repo, tmp_path: Path, embedder
) -> None:  # type: ignore[no-untyped-def]
    """The vector index is trained once the table reaches ``vector_index_rows``; rows
    written later are found before and after the upkeep folds them in."""
    from codechunkd.storage.search import Mode, Searcher

    settings = load_settings(
        env={"CODECHUNKD_INDEX_VECTOR_INDEX_ROWS": "5"},
        overrides={"index.dir": str(tmp_path / "ix")},
    )
    ix = Indexer(settings, embedder)
    repo.write("a.py", PY)
    repo.commit()
    ix.sync(repo.path)
    assert ix.store.has_vector_index()  # trained by the sync that reached 5 rows
    assert not ix.syncer.build_vector_index_if_due()  # once
    repo.write("b.py", "def frobnicate_widgets(count):\n    return count * 2\n")
    ix.sync(repo.path)
    assert ix.store.unfolded(settings.index.fold_rows)[0] > 0  # not in the vector index yet
    query = embedder.embed(["frobnicate widgets"])[0]
    hits = Searcher(ix.store).search("frobnicate widgets", query, k=3, mode=Mode.VECTOR)
    assert hits[0].symbol == "frobnicate_widgets"  # an unindexed row is still found
    assert ix.syncer.upkeep(force=True)  # the daemon's scheduled upkeep folds it in
    assert ix.store.unindexed() == (0, 0)
    hits = Searcher(ix.store).search("frobnicate widgets", query, k=3, mode=Mode.VECTOR)
    assert hits[0].symbol == "frobnicate_widgets"
    ix.close()


def test_a_long_sync_folds_new_rows_into_compact_fragments_and_index_deltas(
    repo: Repo, tmp_path: Path, embedder
) -> None:  # type: ignore[no-untyped-def]
    """A sync of many batches folds as it goes: fragments stay few, the full-text index
    grows by deltas, the BTrees of ``references`` take the new rows, and every row stays
    searchable."""
    from codechunkd.storage.search import Mode, Searcher

    settings = load_settings(
        env={
            "CODECHUNKD_INDEX_VECTOR_INDEX_ROWS": "4",
            "CODECHUNKD_INDEX_FOLD_ROWS": "8",
            "CODECHUNKD_INDEX_BATCH_FILES": "1",
        },
        overrides={"index.dir": str(tmp_path / "ix")},
    )
    ix = Indexer(settings, embedder)
    names = [f"worker_{i}" for i in range(12)]
    for i, name in enumerate(names):
        body = "".join(f"    step_{j} = {i} * {j}\n" for j in range(3))
        repo.write(f"pkg/m{i}.py", f"VALUE_{i} = {i}\n\n\ndef {name}(x):\n{body}    return x\n")
    repo.commit()
    ix.sync(repo.path)  # 12 commits of one file each: folds every few batches, not at the end
    tbl = ix.store.chunks_table()
    rows = tbl.count_rows()
    assert rows >= 24
    pending_rows, pending_fragments = ix.store.unindexed()
    assert pending_rows < 8 and pending_fragments < 12
    assert len(tbl.to_lance().get_fragments()) < 12  # compacted on the way
    fts = tbl.index_stats("fts_text_idx")
    assert fts.num_indices > 1  # deltas, not rebuilds
    assert fts.num_indexed_rows + fts.num_unindexed_rows == rows
    refs = ix.store.db.open_table("references")
    for column in ("name", "path"):  # what questions about names read by
        btree = refs.index_stats(f"{column}_idx")
        assert btree.index_type == "BTREE"
        assert btree.num_indexed_rows + btree.num_unindexed_rows == refs.count_rows()
        assert btree.num_unindexed_rows < btree.num_indexed_rows  # folded in as it goes
    searcher = Searcher(ix.store)
    for name in (names[0], names[5], names[11]):
        query = embedder.embed([name.replace("_", " ")])[0]
        for mode in (Mode.TEXT, Mode.HYBRID):
            assert any(h.symbol == name for h in searcher.search(name, query, k=5, mode=mode))
    ix.close()


def test_a_big_change_starts_with_small_batches_that_double() -> None:
    """The first batch is small (searchable sooner), then sizes double up to the setting."""
    from codechunkd.git.changes import Entry, FileVersion
    from codechunkd.pipeline.batches import _slices

    files = [
        FileVersion(path=f"f{i}.py", blob=f"{i:040x}", entry=Entry.FILE, dirty=False)
        for i in range(100)
    ]
    sizes = [len(s) for s in _slices(files, 32, first=8)]
    assert sizes == [8, 16, 32, 32, 12]
    assert [v for s in _slices(files, 32, first=8) for v in s] == files
    assert [len(s) for s in _slices(files[:5], 2, first=8)] == [2, 2, 1]


KEPT = {
    "src/add.js",
    "src/net.js",
    "src/emit.js",
    "types/add.d.ts",
    "site.map",
    "search/products.map",
    "package.json",
    "go.mod",
    "src/lock.json",
    "docs/lfs.md",
}


def _build_output(repo: Repo) -> None:
    """A package with its builds committed: hand-written code, and what a bundler writes."""
    bundle = "var a=function(n){return n+1};" * 400  # one 12 KB line
    repo.write("src/add.js", "export function add(a, b) {\n  return a + b\n}\n")
    long_regex = "const ipv6 = /" + "(?:[a-f0-9]{1,4}:)" * 40 + "/\n"  # one long hand-written line
    check = "export function isIp{}(s) {{\n  return ipv6.test(s)\n}}\n"
    checks = "".join(check.format(i) for i in range(40))
    repo.write("src/net.js", long_regex + checks)  # 2.8 KB, 26% of it in that line
    repo.write("dist/add.min.js", "export function add(a,b){return a+b}\n")
    repo.write("dist/bundle.js", f"/* built */\n{bundle}\n")
    repo.write("dist/bundle.js.map", '{"version":3,"sources":["../src/add.js"],"mappings":"AAAA"}')
    repo.write("dist/theme.css", "a{color:red}" * 300 + "\n")  # 3.6 KB, one line: minified
    repo.write("site.map", "a hand-written text file that happens to end in .map\n")
    repo.write("search/products.map", '{"mappings": {"properties": {"name": {"type": "text"}}}}')
    repo.write(
        "dist/add.js",
        "export function add(a, b) {\n  return a + b;\n}\n//# sourceMappingURL=add.js.map\n",
    )
    repo.write(
        "dist/add.d.ts",
        "export declare function add(a: number, b: number): number;\n"
        "//# sourceMappingURL=add.d.ts.map",  # no newline at the end
    )
    repo.write(
        "dist/theme.dev.css", "a {\n  color: red;\n}\n\n/*# sourceMappingURL=theme.dev.css.map */\n"
    )
    repo.write("types/add.d.ts", "export declare function add(a: number, b: number): number;\n")
    repo.write("package.json", '{"name": "add", "dependencies": {"left-pad": "^1.3.0"}}\n')
    repo.write("package-lock.json", '{"name": "add", "lockfileVersion": 3, "packages": {}}\n')
    repo.write("web/yarn.lock", 'left-pad@^1.3.0:\n  version "1.3.0"\n')
    repo.write("go.mod", "module example.com/add\n\ngo 1.21\n")
    repo.write("go.sum", "example.com/pad v1.0.0 h1:AAAA=\n")
    repo.write("tools/Cargo.lock", 'version = 3\n\n[[package]]\nname = "pad"\n')
    repo.write("src/lock.json", '{"held_by": "a hand-written file named like a lock"}\n')
    repo.write(
        "src/emit.js", "export const tail = (name) =>\n  `//# sourceMappingURL=${name}.map`\n"
    )
    lfs = "version https://git-lfs.github.com/spec/v1\noid sha256:{}\nsize {}\n"
    repo.write("assets/logo.png", lfs.format("4d7a" * 16, 48213))  # what git holds of it
    repo.write("models/weights.bin", lfs.format("0b1c" * 16, 90_000_000))
    repo.write("docs/lfs.md", "Pointers begin\n\nversion https://git-lfs.github.com/spec/v1\n")
    repo.commit()


def test_build_output_is_a_counted_skip(repo: Repo, tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    """Dependency lock files (by name, in any folder), Git LFS pointers (whatever the name),
    source maps, minified JavaScript and CSS (by name, or most of the file in very long
    lines) and compiled output (a last line naming its source map) are skipped with their
    reasons, and `verify` agrees; manifests, hand-written code with one long line or that
    writes such a comment, declarations by hand, `.map` files that are no source maps and a
    text quoting a pointer's first line are indexed."""
    _build_output(repo)
    settings = load_settings(env={}, overrides={"index.dir": str(tmp_path / "ix")})
    ix = Indexer(settings, embedder)
    report = ix.sync(repo.path)
    assert report.skipped == {
        "minified": 3,
        "source_map": 1,
        "compiled": 3,
        "lockfile": 4,
        "lfs_pointer": 2,
    }
    assert {r["path"] for r in ix.rows()} == KEPT
    assert verify(settings, ix.store, GitSource(repo.path)).ok
    ix.close()


def test_a_large_lock_file_is_skipped_by_its_name_unread(
    repo: Repo, tmp_path: Path, embedder
) -> None:  # type: ignore[no-untyped-def]
    """A lock file over `files.max_file_size` is counted as a `lockfile` (its name says what
    it is before its size is looked at); with `files.skip_generated = false` it is one more
    file too large."""
    entry = '"node_modules/pkg{0}": {{"version": "1.0.{0}", "integrity": "sha512-{0}"}},\n'
    repo.write("package-lock.json", "".join(entry.format(i) for i in range(200)))  # 17 KB
    repo.write("src/add.js", "export function add(a, b) {\n  return a + b\n}\n")
    repo.commit("a lock file over the size limit")
    small = {"CODECHUNKD_FILES_MAX_FILE_SIZE": "4096"}
    settings = load_settings(env=small, overrides={"index.dir": str(tmp_path / "ix")})
    ix = Indexer(settings, embedder)
    assert ix.sync(repo.path).skipped == {"lockfile": 1}
    assert {r["path"] for r in ix.rows()} == {"src/add.js"}
    ix.close()
    keep = load_settings(
        env={**small, "CODECHUNKD_FILES_SKIP_GENERATED": "false"},
        overrides={"index.dir": str(tmp_path / "keep")},
    )
    ix = Indexer(keep, embedder)
    assert ix.sync(repo.path).skipped == {"too_large": 1}
    ix.close()


def test_build_output_is_indexed_when_asked_and_dropped_again(
    repo: Repo, tmp_path: Path, embedder
) -> None:  # type: ignore[no-untyped-def]
    """`files.skip_generated = false` indexes build output like any file; switching the
    skip back on (as an upgrade to a version that skips it does) drops those rows at the
    next sync, and the index equals a fresh chunking."""
    _build_output(repo)
    index = tmp_path / "ix"
    keep = load_settings(
        env={"CODECHUNKD_FILES_SKIP_GENERATED": "false"}, overrides={"index.dir": str(index)}
    )
    ix = Indexer(keep, embedder)
    assert ix.sync(repo.path).skipped == {}
    assert "dist/bundle.js.map" in {r["path"] for r in ix.rows()}
    ix.close()
    default = load_settings(env={}, overrides={"index.dir": str(index)})
    ix = Indexer(default, embedder)
    ix.sync(repo.path)
    assert {r["path"] for r in ix.rows()} == KEPT
    assert verify(default, ix.store, GitSource(repo.path)).ok
    ix.close()


def test_a_languages_chunker_version_rebuilds_only_its_files(repo: Repo, indexer: Indexer) -> None:
    """An index made when the chunker's Go version was another (its state's fingerprint
    says one more than today's ``go``) re-chunks its Go files at the next sync and leaves
    the Python file as it is; once done, the fingerprint is today's and a sync changes
    nothing.  Another settings hash (the budget, the chunker's version of every language)
    rebuilds all."""
    from dataclasses import replace

    from codechunkd.chunking.chunker import LANGUAGE_VERSIONS
    from codechunkd.pipeline.plan import ALL, fingerprint, stale

    repo.write("a.py", PY)
    repo.write("srv/main.go", "package main\n\nfunc main() {\n\tserve()\n}\n")
    repo.write("srv/serve.go", "package main\n\nfunc serve() {}\n")
    repo.commit()
    indexer.sync(repo.path)
    source = report_source(repo)
    state = indexer.store.state(source)
    syncer = indexer.syncer
    assert state is not None and state.fingerprint == syncer.fingerprint
    older = {**LANGUAGE_VERSIONS, "go": LANGUAGE_VERSIONS["go"] + 1}  # (a fixed 7 was today's)
    recorded = fingerprint(syncer.settings, syncer.embedder.model_id, older)
    indexer.store.put_state(replace(state, fingerprint=recorded))
    report = indexer.sync(repo.path)
    assert (report.changed, report.unchanged, report.added, report.deleted) == (2, 1, 0, 0)
    assert report.embedded == 0  # the same chunks: every vector from the cache
    assert indexer.store.state(source).fingerprint == state.fingerprint  # type: ignore[union-attr]
    again = indexer.sync(repo.path)
    assert (again.changed, again.unchanged) == (0, 3)
    fp = state.fingerprint
    base = fp.partition(";")[0]
    assert stale(fp, fp) == frozenset()
    assert stale(f"{base};cpp=1,go=2", f"{base};go=3,rust=1") == {"cpp", "go", "rust"}
    assert stale(f"{base};go=3", f"{'0' * 16};go=3") == ALL
    assert stale("garbage;;=,=x", fp) == ALL  # a state's fingerprint is read, not trusted
