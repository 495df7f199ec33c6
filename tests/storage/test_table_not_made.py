"""A table listed before its first version: the instant a writer is making it.

LanceDB and Lance list a table by its folder (``chunks.lance/``, locally or as a prefix in a
bucket) and write its first manifest last, after its transaction file.  A reader that looks
in between, or a writer that starts after one was killed there, sees a listed table that
will not open.  That is a table not made yet, like a missing one: not damage.  These tests
put the index in that instant on purpose, with the transaction file Lance writes first.
(Once ``state.json`` lists sources, a table with no version is damage: test_damage.py's
"no _versions".)
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from tests.conftest import Repo, S3Server, run_cli

from codechunkd.errors import IndexDamaged
from codechunkd.storage import schema as S
from codechunkd.storage.lance_reader import LanceReader
from codechunkd.storage.objectstore import ObjectStore, S3Client
from codechunkd.storage.store import IndexStore

TXN = "_transactions/0-3f1c2a9e-5b7d-4e0a-9c1b-2d4e6f8a0b1c.txn"
"""What a writer making ``chunks`` has written when the folder is first listed."""


def _half_made(index: Path, table: str = S.CHUNKS) -> None:
    txn = index / f"{table}.lance" / TXN
    txn.parent.mkdir(parents=True)
    txn.write_bytes(b"\x08\x01")


def _reads_as_empty(store: IndexStore | LanceReader) -> None:
    assert not store.has_chunks()
    assert store.count_chunks() == 0
    assert store.count_chunks("source = 'x'") == 0


def test_readers_take_a_listed_table_with_no_version_as_no_table(tmp_path: Path) -> None:
    """Both readers (LanceDB's and Lance's) count, select and describe no rows where they
    said the index was damaged (exit 8); opening the table itself is still an error."""
    index = tmp_path / "index"
    _half_made(index)
    store = IndexStore(str(index))
    assert S.CHUNKS in store.table_names()  # listed, as a reader between the two sees it
    _reads_as_empty(store)
    assert store.rows() == 0 and store.count() == (0, 0)
    assert store.select(None, ["id"]) == [] and store.index_model() is None
    _reads_as_empty(LanceReader(str(index)))
    with pytest.raises(IndexDamaged, match="no version yet"):
        store.chunks_table()  # where a table is needed at once, it is still an error


def test_a_listed_table_whose_versions_are_a_file_is_damage(tmp_path: Path) -> None:
    """What is taken for a table not made yet is only a ``_versions/`` that is missing or
    holds no manifest: one that is a file is damage still."""
    index = tmp_path / "index"
    _half_made(index)
    (index / "chunks.lance" / "_versions").write_text("not a folder")
    with pytest.raises(IndexDamaged):
        IndexStore(str(index)).count_chunks()
    with pytest.raises(IndexDamaged):
        LanceReader(str(index)).count_chunks()


@pytest.mark.slow
def test_the_commands_see_an_index_being_made_and_the_writer_finishes_it(
    repo: Repo, tmp_path: Path
) -> None:
    """``search`` and ``status`` during a first index's table creation are not told the
    index is damaged; a writer killed there leaves a table that the next ``index`` makes."""
    index = tmp_path / "index"
    _half_made(index)
    searched = run_cli("search", "add numbers", "--mode", "text", index=index)
    assert searched.returncode == 0, searched.stderr
    status = run_cli("status", index=index)
    assert status.returncode != 8 and "DAMAGED" not in status.stdout, status.stdout
    assert "nothing indexed yet" in status.stdout, status.stdout
    repo.write("calc.py", "def add_numbers(a, b):\n    return a + b\n")
    repo.commit("init")
    indexed = run_cli("index", str(repo.path), index=index)
    assert indexed.returncode == 0, indexed.stderr
    assert IndexStore(str(index)).count_chunks() == 1
    found = run_cli("search", "add_numbers", "--mode", "text", index=index)
    assert found.returncode == 0 and "calc.py" in found.stdout, found.stdout + found.stderr


def test_in_an_object_store_too(s3: S3Server) -> None:
    """The race first seen on S3: the writer's ``chunks/`` prefix listed, its manifest not
    yet written, and a reader polling ``count_chunks``."""
    store = ObjectStore(
        endpoint=s3.endpoint,
        allow_http=True,
        access_key_id=s3.KEY_ID,
        secret_access_key=s3.SECRET,
    )
    prefix = f"nm-{uuid.uuid4().hex[:10]}"
    put = S3Client(store, s3.BUCKET).request("PUT", f"{prefix}/chunks.lance/{TXN}", b"\x08\x01")
    assert put.status == 200, put
    uri = f"s3://{s3.BUCKET}/{prefix}"
    reader = IndexStore(uri, storage_options=store.storage_options())
    assert S.CHUNKS in reader.table_names()
    _reads_as_empty(reader)
    _reads_as_empty(LanceReader(uri, storage_options=store.storage_options()))
