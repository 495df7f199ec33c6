"""`codechunkd defs`, `refs` and `map` through the entry point, on a real index."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from codechunkd.config.settings import Settings
from codechunkd.storage.reader import open_index
from tests.conftest import Indexer, Repo, scaled

EXE = str(Path(sys.executable).parent / "codechunkd")


def _run(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EXE, *argv], capture_output=True, text=True, timeout=scaled(120), cwd=cwd
    )


def _calls(name: str, where: tuple[str, str]) -> list[tuple[str, str, str]]:
    """``refs NAME --calls``: each caller's symbol, how it was resolved, the target's path."""
    done = _run("refs", name, "--calls", *where, "--json")
    assert done.returncode == 0, done.stderr
    return [(u["symbol"], u["resolved"], u["target"]["path"]) for u in json.loads(done.stdout)]


def _indexed(repo: Repo, settings: Settings, embedder, index_dir: Path) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """Index ``repo`` once; the CLI's arguments naming that index."""
    ix = Indexer(settings, embedder)
    ix.sync(repo.path)
    ix.close()
    return ("--index-dir", str(index_dir))


@pytest.mark.slow
def test_defs_refs_and_map_answer_from_the_references_table(
    repo: Repo,
    settings: Settings,
    index_dir: Path,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """defs finds the definition (its id a chunk id), refs --calls the callers with how
    each resolved, a name in a hostile file name is escaped in text, an empty answer is
    said on stderr, the map ranks the file everything refers to first and keeps to its
    budget; a bad budget is exit 2."""
    repo.write("lib/core.py", "def parse(x):\n    return x\n\n\ndef unused():\n    return 1\n")
    repo.write("a.py", "from lib.core import parse\n\n\ndef one():\n    return parse(1)\n")
    repo.write("b\x1b[31m.py", "from lib.core import parse\n\n\ndef two():\n    return parse(2)\n")
    repo.commit("init")
    ix = Indexer(settings, embedder)
    ix.sync(repo.path)
    ids = {r["id"] for r in ix.rows()}
    ix.close()
    where = ("--index-dir", str(index_dir))
    done = _run("defs", "parse", *where, "--json")
    assert done.returncode == 0, done.stderr
    [d] = json.loads(done.stdout)
    assert d["path"] == "lib/core.py" and d["symbol"] == "parse" and d["id"] in ids
    done = _run("refs", "parse", "--calls", *where, "--json")
    assert done.returncode == 0, done.stderr
    callers = {(u["symbol"], u["resolved"], u["target"]["id"]) for u in json.loads(done.stdout)}
    assert callers == {("one", "imported", d["id"]), ("two", "imported", d["id"])}
    text = _run("refs", "parse", *where)
    assert text.returncode == 0 and "\x1b" not in text.stdout and "\\x1b" in text.stdout
    missing = _run("defs", "nothing_named_so", *where)
    assert missing.returncode == 1 and not missing.stdout
    assert "no definition of 'nothing_named_so' in the index" in missing.stderr
    missing = _run("refs", "unused", *where)
    assert missing.returncode == 0 and not missing.stdout
    assert "no uses of 'unused' in the index" in missing.stderr
    missing = _run("refs", "Parser.parse", *where)  # no such class: the name is not defined
    assert missing.returncode == 0 and not missing.stdout
    assert "no definition of 'Parser.parse' in the index" in missing.stderr
    assert _run("defs", "nothing_named_so", *where, "--json").stdout.strip() == "[]"
    done = _run("map", *where, "--budget", "60", "--json")
    assert done.returncode == 0, done.stderr
    entries = json.loads(done.stdout)
    assert entries[0]["path"] == "lib/core.py"
    assert [x["signature"] for x in entries[0]["definitions"]] == ["def parse(x)"]
    assert _run("map", *where, "--budget", "0").returncode == 2


def test_the_map_shows_a_files_signatures_in_file_order(
    repo: Repo,
    settings: Settings,
    index_dir: Path,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """The map chooses a file's signatures by how much the rest of the code refers to them
    (``--json``: best first) and shows them in the order they come in the file."""
    repo.write("lib/core.py", "def first(x):\n    return x\n\n\ndef second(x):\n    return x\n")
    repo.write(
        "a.py",
        "from lib.core import first, second\n\n\n"
        "def one():\n    return second(first(1)) + second(2) + second(3)\n",
    )
    repo.commit("init")
    where = (*_indexed(repo, settings, embedder, index_dir), "--budget", "200")
    done = _run("map", *where, "--json")
    assert done.returncode == 0, done.stderr
    [core] = [e for e in json.loads(done.stdout) if e["path"] == "lib/core.py"]
    assert [x["signature"] for x in core["definitions"]] == ["def second(x)", "def first(x)"]
    text = _run("map", *where).stdout
    assert "lib/core.py:\n      1  def first(x)\n      5  def second(x)\n" in text, text


def test_folders_and_repositories_are_read_from_where_you_stand(
    repo: Repo,
    settings: Settings,
    index_dir: Path,
    tmp_path: Path,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """Two repositories in one index, commands run in a subfolder of one: ``map .`` maps that
    folder and ``map sub`` one below it (as git reads a pathspec); ``map`` and ``map --repo .``
    the repository you are in; ``defs``/``search --repo .`` answer from it alone; a folder
    with nothing indexed says so (exit 1); an absolute folder or a ``--repo`` in no indexed
    repository is an error naming the indexed ones (exit 2)."""
    parse = "from lib.core import parse\n\n\ndef {}():\n    return parse(1)\n"
    repo.write("lib/core.py", "def parse(x):\n    return x\n")
    repo.write("lib/sub/deep.py", parse.format("deep"))
    repo.write("app.py", parse.format("main"))
    repo.commit("init")
    other = Repo(tmp_path / "other")
    other.write("src/core.py", "def parse(y):\n    return -y\n")
    other.write("src/use.py", "from src.core import parse\n\n\ndef use():\n    return parse(2)\n")
    other.commit("init")
    ix = Indexer(settings, embedder)
    ix.sync(repo.path)
    ix.sync(other.path)
    ix.close()
    where = ("--index-dir", str(index_dir))
    lib = repo.path / "lib"

    def mapped(*argv: str) -> set[str]:
        done = _run("map", *argv, *where, "--json", cwd=lib)
        assert done.returncode == 0, done.stderr
        return {e["path"] for e in json.loads(done.stdout)}

    assert mapped(".") == {"lib/core.py", "lib/sub/deep.py"}
    assert mapped("sub") == {"lib/sub/deep.py"}
    assert mapped() == mapped("--repo", ".") == {"lib/core.py", "lib/sub/deep.py", "app.py"}
    assert mapped("src", "--repo", str(other.path / "src")) == {"src/core.py", "src/use.py"}
    for command in ("defs", "search"):
        done = _run(command, "parse", "--repo", ".", *where, "--json", cwd=lib)
        assert done.returncode == 0, done.stderr
        found = json.loads(done.stdout)
        assert found and {d["repo"] for d in found} == {str(repo.path)}, command
    empty = _run("map", "nope", *where, cwd=lib)
    assert (empty.returncode, empty.stdout) == (1, "")
    assert f"no indexed files under lib/nope in {repo.path}" in empty.stderr
    for argv in (("map", str(tmp_path)), ("defs", "parse", "--repo", str(tmp_path))):
        done = _run(*argv, *where, cwd=lib)
        assert done.returncode == 2 and "is in no indexed repository" in done.stderr, done.stderr
        assert str(other.path) in done.stderr
    done = _run("search", "parse", "--repo", str(tmp_path), *where, cwd=lib)
    assert done.returncode == 2 and "is in no indexed repository" in done.stderr, done.stderr


@pytest.mark.slow
def test_defs_finds_a_class_an_export_macro_marks_in_a_header(
    repo: Repo,
    settings: Settings,
    index_dir: Path,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """A C++ library's real header (Arrow's ``status.h``, as pyarrow installs it): the
    ``.h`` file is read as C++, and ``class ARROW_EXPORT [[nodiscard]] Status : …`` is the
    class ``Status`` with its methods, not a function of that name; a forward declaration
    (``class StatusConstant;``) defines nothing."""
    import pyarrow

    source = (Path(pyarrow.get_include()) / "arrow" / "status.h").read_bytes()
    assert b"class ARROW_EXPORT [[nodiscard]] Status" in source
    (repo.path / "include" / "arrow").mkdir(parents=True)
    (repo.path / "include" / "arrow" / "status.h").write_bytes(source)
    repo.commit("arrow's status.h")
    ix = Indexer(settings, embedder)
    ix.sync(repo.path)
    cols = ["symbol", "kind", "language", "content"]
    rows = ix.store.chunks_table().search().select(cols).limit(None).to_arrow().to_pylist()
    ix.close()
    [cls] = [r for r in rows if r["symbol"] == "arrow::Status" and r["kind"] == "class"]
    assert cls["language"] == "cpp"
    assert "ARROW_EXPORT" in cls["content"]  # the text as written
    assert {r["kind"] for r in rows if r["symbol"] == "arrow::Status::ok"} == {"method"}
    where = ("--index-dir", str(index_dir))
    done = _run("defs", "Status", *where, "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    # the class first (from its doc comment), then its constructors, in and out of it
    assert found[0]["path"] == "include/arrow/status.h", found
    assert found[0]["symbol"] == "arrow::Status", found
    assert {d["symbol"] for d in found[1:]} == {"arrow::Status::Status"}, found
    assert b"\nclass StatusConstant;\n" in source  # declared here, defined elsewhere
    assert _run("defs", "StatusConstant", *where).returncode == 1
    done = _run("defs", "Status.ok", *where, "--json")
    assert done.returncode == 0 and json.loads(done.stdout)[0]["symbol"].endswith("ok"), done.stdout


@pytest.mark.slow
def test_perl_refs_and_a_map_of_files_whose_definitions_nobody_uses(
    repo: Repo,
    settings: Settings,
    index_dir: Path,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """Perl's standard library's Text::Tabs and a module that imports ``expand`` from it:
    ``refs`` finds the call, resolved through the ``use`` list to Text/Tabs.pm; the map
    lists Text::Tabs's used sub, and for the importing module, whose subs nobody uses, its
    own package and subs in file order (a Python file keeps its ranked list); ``defs`` finds
    a package by its statement and a sub by its package-qualified name."""
    tabs = Path("/usr/share/perl/5.36/Text/Tabs.pm")
    source = (
        tabs.read_bytes()
        if tabs.exists()
        else b"package Text::Tabs;\n\nsub expand {\n  my @l;\n  return @l;\n}\n\n"
        b"sub unexpand\n{\n  my (@l) = @_;\n  return expand(@l);\n}\n\n1;\n"
    )
    (repo.path / "Text").mkdir()
    (repo.path / "Text" / "Tabs.pm").write_bytes(source)
    repo.write(
        "lib/Fold.pm",
        "package Fold;\nuse Text::Tabs qw(expand);\n\nsub fold {\n  return expand(@_);\n}\n\n"
        "sub unfold {\n  my $self = shift;\n  return $self->fold(trim(@_));\n}\n\n"
        "sub trim { return @_ }\n\n1;\n",
    )
    repo.write("lib/core.py", "def parse(x):\n    return x\n\n\ndef unused():\n    return 1\n")
    repo.write("a.py", "from lib.core import parse\n\n\ndef one():\n    return parse(1)\n")
    repo.commit("perl and python")
    where = _indexed(repo, settings, embedder, index_dir)
    done = _run("refs", "expand", "--calls", *where, "--json")
    assert done.returncode == 0, done.stderr
    uses = {u["path"]: u for u in json.loads(done.stdout)}
    use = uses["lib/Fold.pm"]
    assert (use["symbol"], use["resolved"]) == ("Fold::fold", "imported")
    assert use["target"]["path"] == "Text/Tabs.pm"
    own = uses["Text/Tabs.pm"]  # ``unexpand`` calls ``expand``, a sub of its own package
    assert (own["symbol"], own["resolved"]) == ("Text::Tabs::unexpand", "exact")
    done = _run("map", *where, "--budget", "1000", "--json")
    assert done.returncode == 0, done.stderr
    entries = {e["path"]: e["definitions"] for e in json.loads(done.stdout)}
    assert [d["signature"] for d in entries["Text/Tabs.pm"]] == ["sub expand"]
    fold = entries["lib/Fold.pm"]
    assert [d["signature"] for d in fold] == ["Fold", "sub fold", "sub unfold", "sub trim"]
    assert [d["line"] for d in fold] == [1, 4, 8, 13]  # the package, then its subs
    done = _run("refs", "Fold::fold", "--calls", *where, "--json")  # ``$self->fold``
    assert done.returncode == 0, done.stderr
    assert [(u["symbol"], u["resolved"]) for u in json.loads(done.stdout)] == [
        ("Fold::unfold", "exact")
    ]
    done = _run("refs", "trim", "--calls", *where, "--json")  # a sub of the same package
    assert [(u["symbol"], u["resolved"]) for u in json.loads(done.stdout)] == [
        ("Fold::unfold", "exact")
    ]
    assert [d["signature"] for d in entries["lib/core.py"]] == ["def parse(x)"]
    assert [d["signature"] for d in entries["a.py"]] == ["def one()"]
    done = _run("defs", "Text::Tabs", *where, "--json")  # the package statement's chunk
    assert done.returncode == 0, done.stderr
    assert [d["path"] for d in json.loads(done.stdout)] == ["Text/Tabs.pm"]
    done = _run("defs", "Text::Tabs::unexpand", *where, "--json")
    assert done.returncode == 0, done.stderr
    [d] = json.loads(done.stdout)
    lines = source.decode().splitlines()
    line = 1 + next(i for i, x in enumerate(lines) if x.startswith("sub unexpand"))
    assert d["path"] == "Text/Tabs.pm" and d["line"] == line


@pytest.mark.slow
def test_bash_refs_resolve_through_source(
    repo: Repo,
    settings: Settings,
    index_dir: Path,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """A script that sources ``"$DIR/lib/common.sh"`` and calls its function: ``refs`` finds
    the call, resolved through the ``source`` line (another script's function of the same
    name is not the target); a program (``rsync``) is defined nowhere."""
    repo.write("scripts/lib/common.sh", 'log_info() {\n  echo "[info] $*"\n}\n')
    repo.write("tools/log.sh", 'log_info() {\n  printf "%s\\n" "$*" >&2\n}\n')
    repo.write(
        "scripts/deploy.sh",
        '#!/bin/bash\nDIR="$(dirname "$0")"\nsource "$DIR/lib/common.sh"\n\n'
        'deploy() {\n  log_info "deploying $1"\n  rsync -a . "$1"\n}\n',
    )
    repo.commit("scripts")
    where = _indexed(repo, settings, embedder, index_dir)
    done = _run("refs", "log_info", "--calls", *where, "--json")
    assert done.returncode == 0, done.stderr
    uses = json.loads(done.stdout)
    assert [(u["path"], u["symbol"], u["resolved"]) for u in uses] == [
        ("scripts/deploy.sh", "deploy", "imported")
    ], uses
    assert uses[0]["target"]["path"] == "scripts/lib/common.sh"
    assert _run("defs", "rsync", *where).returncode == 1


def test_php_refs_resolve_through_namespaces(
    repo: Repo,
    settings: Settings,
    index_dir: Path,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """PHP laid out as Google's App Engine SDK is, each namespace in a folder of another
    name: a static call on a class a ``use`` imports finds that class's method (not the
    same-named class of another namespace); ``$this->`` finds the class's own method or a
    base's; ``new`` finds a class of the same namespace; a function of a file
    ``require_once``d is found there; a bare call (``count($items)``) is never a method,
    however named, of the class or of a file required."""
    repo.write(
        "sdk/google/appengine/runtime/ApiProxy.php",
        "<?php\nnamespace google\\appengine\\runtime;\n\nclass ApiProxy {\n"
        "  public static function makeSyncCall($package, $method) {\n"
        "    return [$package, $method];\n  }\n}\n",
    )
    repo.write(
        "sdk/legacy/ApiProxy.php",
        "<?php\nnamespace legacy;\n\nclass ApiProxy {\n"
        "  public static function makeSyncCall($a, $b) { return null; }\n}\n",
    )
    repo.write(
        "sdk/lib/util.php",
        "<?php\nfunction format_items($items) { return $items; }\n\n"
        "class Bag {\n  public function count() { return 0; }\n}\n",
    )
    users = "sdk/google/appengine/api/users"
    repo.write(
        f"{users}/BaseService.php",
        "<?php\nnamespace google\\appengine\\api\\users;\n\nabstract class BaseService {\n"
        "  public function describe() { return static::class; }\n}\n",
    )
    repo.write(
        f"{users}/UsersException.php",
        "<?php\nnamespace google\\appengine\\api\\users;\n\n"
        "class UsersException extends \\Exception {}\n",
    )
    repo.write(
        f"{users}/UserService.php",
        "<?php\nnamespace google\\appengine\\api\\users;\n\n"
        "use google\\appengine\\runtime\\ApiProxy;\n\n"
        "require_once __DIR__ . '/../../../../lib/util.php';\n\n"
        "final class UserService extends BaseService {\n"
        "  public function current() {\n    $items = format_items($this->load());\n"
        "    if (count($items) == 0) {\n      throw new UsersException($this->describe());\n"
        "    }\n    return ApiProxy::makeSyncCall('user', 'GetCurrentUser');\n  }\n\n"
        "  public function count() { return 0; }\n\n"
        "  private function load() { return []; }\n}\n",
    )
    repo.commit("php")
    where = _indexed(repo, settings, embedder, index_dir)
    service = "google\\appengine\\api\\users::UserService::current"

    assert _calls("makeSyncCall", where) == [
        (service, "imported", "sdk/google/appengine/runtime/ApiProxy.php")
    ]
    assert _calls("load", where) == [(service, "exact", f"{users}/UserService.php")]
    assert _calls("describe", where) == [(service, "imported", f"{users}/BaseService.php")]
    assert _calls("UsersException", where) == [(service, "imported", f"{users}/UsersException.php")]
    assert _calls("format_items", where) == [(service, "imported", "sdk/lib/util.php")]
    assert _calls("count", where) == []


def test_cmake_refs_ignore_case_and_resolve_through_include(
    repo: Repo,
    settings: Settings,
    index_dir: Path,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """CMake's commands are one name in any case: ``refs`` finds the calls of a macro
    defined in upper case (as CMake's own modules define them) and written in lower case,
    through the ``include`` of its module; ``defs`` finds it by either spelling."""
    repo.write(
        "cmake/CMakePushCheckState.cmake",
        "macro(CMAKE_PUSH_CHECK_STATE)\n  set(_STATE 1)\nendmacro()\n",
    )
    repo.write(
        "tools/Other.cmake",
        "macro(cmake_push_check_state)\n  message(STATUS other)\nendmacro()\n",
    )
    repo.write(
        "CMakeLists.txt",
        "cmake_minimum_required(VERSION 3.20)\nproject(demo C)\n"
        "include(cmake/CMakePushCheckState.cmake)\n\nfunction(check_features)\n"
        "  cmake_push_check_state()\nendfunction()\n\nCheck_Features()\n",
    )
    repo.commit("cmake")
    where = _indexed(repo, settings, embedder, index_dir)
    done = _run("refs", "CMAKE_PUSH_CHECK_STATE", "--calls", *where, "--json")
    assert done.returncode == 0, done.stderr
    uses = json.loads(done.stdout)
    assert [(u["path"], u["symbol"], u["resolved"]) for u in uses] == [
        ("CMakeLists.txt", "check_features", "imported")
    ], uses
    assert uses[0]["target"]["path"] == "cmake/CMakePushCheckState.cmake"
    done = _run("refs", "check_features", "--calls", *where, "--json")
    assert [(u["line"], u["resolved"]) for u in json.loads(done.stdout)] == [(9, "exact")]
    for name in ("Check_Features", "CHECK_FEATURES"):
        done = _run("defs", name, *where, "--json")
        assert done.returncode == 0, done.stderr
        assert [d["path"] for d in json.loads(done.stdout)] == ["CMakeLists.txt"]


def test_perl_methods_resolve_through_base_classes(
    repo: Repo,
    settings: Settings,
    index_dir: Path,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """A Perl package's bases (``use parent``, ``our @ISA``): ``$self->describe`` in a
    subclass is the base's ``describe``, and ``SUPER::new`` the base's ``new``, in another
    file; the subclass's own ``describe`` of another package is not the target."""
    repo.write(
        "lib/Shape.pm",
        "package Shape;\n\nsub new {\n  my ($class, %a) = @_;\n  return bless {%a}, $class;\n}\n\n"
        "sub describe {\n  my $self = shift;\n  return ref($self);\n}\n\n1;\n",
    )
    repo.write(
        "lib/Circle.pm",
        "package Circle;\nuse parent -norequire, 'Shape';\n\nsub new {\n"
        "  my $self = shift->SUPER::new(@_);\n  return $self;\n}\n\n"
        'sub show {\n  my $self = shift;\n  print $self->describe, "\\n";\n}\n\n1;\n',
    )
    repo.write(
        "lib/Square.pm",
        "package Square;\nour @ISA = ('Shape');\n\nsub show {\n  my $self = shift;\n"
        "  return $self->describe;\n}\n\n1;\n",
    )
    repo.write(
        "lib/Label.pm",
        "package Label;\n\nsub describe {\n  return 'label';\n}\n\n1;\n",
    )
    repo.commit("perl classes")
    where = _indexed(repo, settings, embedder, index_dir)
    done = _run("refs", "Shape::describe", "--calls", *where, "--json")
    assert done.returncode == 0, done.stderr
    uses = json.loads(done.stdout)
    assert [(u["symbol"], u["resolved"]) for u in uses] == [
        ("Circle::show", "imported"),
        ("Square::show", "imported"),
    ], uses
    done = _run("refs", "Shape::new", "--calls", *where, "--json")
    assert [(u["symbol"], u["resolved"]) for u in json.loads(done.stdout)] == [
        ("Circle::new", "imported")
    ]


CS_SERVICE = """\
using System;
using App.Models;
using static Foo.Util.Helpers;

namespace App.Services;

public class UserService : BaseService
{
    private readonly IRepo _repo;

    public User Find(int id)
    {
        User found = _repo.Get(id);
        Validate(found);
        Check(found);
        found.Rename("x");
        this.Log("found");
        return found;
    }

    private void Validate(User u) { }
}
"""

CS_LIBRARY = """\
namespace App.Services
{
    public abstract class BaseService
    {
        protected void Log(string s) { }
    }

    public interface IRepo { App.Models.User Get(int id); }
}

namespace App.Models
{
    public class User
    {
        public void Rename(string n) { }
    }
}

namespace Foo.Util
{
    public static class Helpers { public static void Check(object o) { } }
}

namespace Other
{
    public class User { public void Rename(string n) { } }
    public static class Helpers { public static void Check(object o) { } }
}
"""


def test_csharp_refs_resolve_by_full_names(
    repo: Repo,
    settings: Settings,
    index_dir: Path,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """C# names resolve by the full names the compiler would try, whatever file holds
    them: a method of the class, a base's through ``this.``, a type a ``using`` brings in
    and its method through a variable of it, a ``using static`` class's method called bare;
    the same-named classes of another namespace are never the target."""
    repo.write("src/Services/UserService.cs", CS_SERVICE)
    repo.write("lib/Library.cs", CS_LIBRARY)
    repo.commit("csharp")
    where = _indexed(repo, settings, embedder, index_dir)
    find = "App.Services.UserService.Find"

    assert _calls("Validate", where) == [(find, "exact", "src/Services/UserService.cs")]
    assert _calls("BaseService.Log", where) == [(find, "imported", "lib/Library.cs")]
    assert _calls("App.Models.User.Rename", where) == [(find, "imported", "lib/Library.cs")]
    assert _calls("Other.User.Rename", where) == []
    assert _calls("Foo.Util.Helpers.Check", where) == [(find, "imported", "lib/Library.cs")]
    assert _calls("Other.Helpers.Check", where) == []
    assert _calls("IRepo.Get", where) == [(find, "imported", "lib/Library.cs")]


def test_refs_depth_follows_callers_up_to_what_a_change_can_reach(
    repo: Repo,
    settings: Settings,
    index_dir: Path,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """``refs NAME --depth N``: the callers, their callers, … N levels up, each with its
    level and the definition it calls; a cycle is followed once; code at module level ends
    a chain; at most ``limit`` calls, nearest first; past 5 levels, or with ``--callees``, an
    error that says why."""
    repo.write(
        "shop/tax.py",
        "def rate(region):\n    return 0.2\n\n\ndef tax(x, region):\n    return x * rate(region)\n",
    )
    repo.write(
        "shop/cart.py",
        "from shop.tax import tax\n\n\ndef total(items):\n"
        "    return sum(tax(i, 'eu') for i in items)\n\n\ndef checkout(cart):\n"
        "    return total(cart) + retry(cart)\n\n\ndef retry(cart):\n"
        "    return checkout(cart)\n",
    )
    repo.write("shop/main.py", "from shop.cart import total\n\nTOTAL = total([])\n")
    repo.commit("shop")
    where = _indexed(repo, settings, embedder, index_dir)
    done = _run("refs", "rate", "--depth", "5", *where, "--json")
    assert done.returncode == 0, done.stderr
    rows = [
        (u["depth"], u["path"], u["symbol"], u["target"]["symbol"]) for u in json.loads(done.stdout)
    ]
    assert rows == [
        (1, "shop/tax.py", "tax", "rate"),
        (2, "shop/cart.py", "total", "tax"),
        (3, "shop/cart.py", "checkout", "total"),
        (3, "shop/main.py", "", "total"),  # TOTAL = total([]): module code, called by nothing
        (4, "shop/cart.py", "retry", "checkout"),
        (5, "shop/cart.py", "checkout", "retry"),  # the cycle: checkout is not followed again
    ], rows
    text = _run("refs", "rate", "--depth", "2", *where).stdout.splitlines()
    assert text[0].startswith("shop/tax.py:6  call") and "-> rate" in text[0]
    assert text[1].startswith("  shop/cart.py:5  call") and "-> tax" in text[1]
    capped = open_index(settings=settings).refs.impact("rate", depth=5, limit=3)
    assert [(level, u.chunk_symbol) for level, u in capped] == [
        (1, "tax"),
        (2, "total"),
        (3, "checkout"),
    ]
    for bad in (["--depth", "6"], ["--depth", "2", "--callees"]):
        done = _run("refs", "rate", *bad, *where)
        assert done.returncode == 2 and "--depth" in done.stderr, done.stderr


def test_ruby_refs_resolve_through_require_and_bases(
    repo: Repo,
    settings: Settings,
    index_dir: Path,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """Ruby: a method called bare is the class's own (``exact``); a method on a variable
    given its class by ``Cart.new`` is that class's or its base's, in the file
    ``require_relative`` names; a same-named method of an unrelated class is not the
    target."""
    repo.write(
        "lib/shop/cart.rb",
        'require_relative "base"\n\nmodule Shop\n  class Cart < Base\n    def total\n'
        "      tax(1)\n    end\n\n    def self.build\n      cart = Cart.new\n"
        "      cart.check!\n    end\n\n    def tax(x)\n      x\n    end\n  end\nend\n",
    )
    repo.write(
        "lib/shop/base.rb",
        "module Shop\n  class Base\n    def check!\n      true\n    end\n  end\nend\n",
    )
    repo.write(
        "lib/other.rb",
        "class Other\n  def tax(x)\n    0\n  end\n\n  def check!\n    false\n  end\nend\n",
    )
    repo.commit("ruby")
    where = _indexed(repo, settings, embedder, index_dir)

    assert _calls("Shop.Cart.tax", where) == [("Shop.Cart.total", "exact", "lib/shop/cart.rb")]
    base = ("Shop.Cart.build", "imported", "lib/shop/base.rb")
    assert _calls("Shop.Base.check!", where) == [base]
    assert _calls("Other.tax", where) == [] and _calls("Other.check!", where) == []
