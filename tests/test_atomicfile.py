"""The one atomic-write helper: whole or nothing, and no temporary file left behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from codechunkd import atomicfile


def test_write_text_replaces_the_file_whole(tmp_path: Path) -> None:
    """A new file is created, an existing one replaced (a new inode: readers holding the old
    one finish reading it whole), and nothing but the file is left in the folder."""
    target = tmp_path / "state.json"
    atomicfile.write_text(target, "first")
    old_inode = target.stat().st_ino
    with target.open() as reader:
        atomicfile.write_text(target, "second, longer")
        assert reader.read() == "first"
    assert target.read_text() == "second, longer"
    assert target.stat().st_ino != old_inode
    assert os.listdir(tmp_path) == ["state.json"]


def test_a_failed_write_keeps_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    """When the rename fails (here: the target is a non-empty folder) the error leaves, the
    target is untouched and the temporary file is removed."""
    target = tmp_path / "taken"
    target.mkdir()
    (target / "inside").write_text("kept")
    with pytest.raises(OSError):
        atomicfile.write_text(target, "new")
    assert (target / "inside").read_text() == "kept"
    assert sorted(os.listdir(tmp_path)) == ["taken"]
