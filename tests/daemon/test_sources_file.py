"""A damaged ``sources.json`` is said, never read as an empty list: ``run`` does not start
without its sources, and ``add``/``remove`` do not write a list that drops them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import Repo

from codechunkd.cli import main
from codechunkd.daemon.control import SourceSpec, read_sources, write_sources
from codechunkd.errors import ConfigError


def _main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def _repo(root: Path, name: str) -> Repo:
    r = Repo(root / name)
    r.write("m.py", "X = 1\n")
    r.commit()
    return r


def test_a_file_cut_short_stops_run_add_and_remove_and_is_kept(
    tmp_path: Path, index_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two sources added, then the file cut short (a power cut): ``run`` refuses (exit 2)
    instead of saying "no sources", and ``add C``/``remove A`` refuse instead of writing a
    list of C alone; the file is left as it was, for the user to mend."""
    a, b, c = (_repo(tmp_path, n) for n in "abc")
    common = ["--index-dir", str(index_dir)]
    for r in (a, b):
        assert _main(["add", str(r.path), *common], capsys)[0] == 0
    file = index_dir / "_codechunkd" / "sources.json"
    whole = file.read_bytes()
    file.write_bytes(whole[:40])
    for argv in (["run"], ["add", str(c.path)], ["remove", str(a.path)]):
        code, out, err = _main([*argv, *common], capsys)
        assert code == 2, (argv, out, err)
        assert f"the list of sources {file} is damaged: not valid JSON" in err, err
        assert "fix it, or remove it" in err
        assert err.count("\n") == 1 and "unexpected" not in err and "no sources" not in err
        assert file.read_bytes() == whole[:40]
    file.write_bytes(whole)  # mended: both sources are back, and C is added to them
    assert _main(["add", str(c.path), *common], capsys)[0] == 0
    assert [s.path for s in read_sources(file)] == [str(r.path.resolve()) for r in (a, b, c)]


def test_a_folder_in_place_of_the_file_is_said(
    repo: Repo, index_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder at ``sources.json``: ``add`` says the list cannot be read (exit 2), not
    "unexpected: [Errno 21]", and leaves the folder alone."""
    repo.write("m.py", "X = 1\n")
    repo.commit()
    file = index_dir / "_codechunkd" / "sources.json"
    (file / "inside").mkdir(parents=True)
    code, _, err = _main(["add", str(repo.path), "--index-dir", str(index_dir)], capsys)
    assert code == 2, err
    assert f"the list of sources {file} cannot be read (Is a directory)" in err
    assert "unexpected" not in err
    assert (file / "inside").is_dir()


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "not valid JSON"),
        (b"\xff\xfe{}", "not text"),
        (b"[]", 'no "sources" list'),
        (b'{"sources": {"path": "/a"}}', 'no "sources" list'),
        (b'{"sources": ["/a"]}', "source 1 is not"),
        (b'{"sources": [{"path": "/a"}, {"ref": "main"}]}', "source 2 is not"),
        (b'{"sources": [{"path": "/a", "ref": 5}]}', "source 1 is not"),
        (b'{"sources": [{"path": "/a"}, {"path": "/tmp/a\\u0000b"}]}', "source 2 has a NUL"),
        (b'{"sources": [{"path": "/tmp/a\\ud800"}]}', "source 1 has a NUL or a lone"),
        (b'{"sources": [{"path": "/a", "ref": "main\\u0000"}]}', "source 1 has a NUL"),
    ],
)
def test_every_kind_of_damage_is_an_error_naming_the_file(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    """Whatever is wrong with it, reading the list raises ``ConfigError`` (exit 2) naming
    the file and what is wrong; only a missing file is an empty list."""
    file = tmp_path / "sources.json"
    assert read_sources(file) == []
    file.write_bytes(content)
    with pytest.raises(ConfigError) as exc:
        read_sources(file)
    assert str(file) in str(exc.value) and reason in str(exc.value)
    assert "\n" not in str(exc.value)


def test_what_write_sources_writes_reads_back(tmp_path: Path) -> None:
    """A source without a ref and one with a ref: written, read back the same, and the file
    is the documented shape (no temporary file left beside it)."""
    specs = [SourceSpec(path="/src/a"), SourceSpec(path="/src/b.git", ref="refs/heads/main")]
    file = tmp_path / "meta" / "sources.json"
    write_sources(file, specs)
    assert read_sources(file) == specs
    assert json.loads(file.read_text()) == {
        "sources": [
            {"path": "/src/a", "ref": None},
            {"path": "/src/b.git", "ref": "refs/heads/main"},
        ]
    }
    assert [p.name for p in file.parent.iterdir()] == ["sources.json"]
