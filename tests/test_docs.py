"""Every command answers --help and is documented in the README."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codechunkd.cli import COMMANDS, build_parser, main
from tests.conftest import Repo

README = (Path(__file__).parents[1] / "README.md").read_text()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_commands_are_documented(command: str) -> None:
    """Every command is shown in the README."""
    assert f"codechunkd {command}" in README


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_commands_have_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Every command answers ``--help`` with a usage line and exit status 0."""
    argv = [command, "export", "--help"] if command == "model" else [command, "--help"]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0
    assert "usage: codechunkd" in capsys.readouterr().out


def _parsers(parser: argparse.ArgumentParser, name: str) -> Iterator[tuple[str, Any]]:
    """(command line, parser) for the parser and every subcommand under it."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, subparser in action.choices.items():
                yield from _parsers(subparser, f"{name} {sub}")


def test_every_subcommand_and_option_has_help() -> None:
    """Every subcommand and every option or argument of every parser has a help text (as in
    sqlite-utils' ``test_commands_have_help``): ``--help`` never shows a bare flag."""
    missing = []
    for name, parser in _parsers(build_parser(), "codechunkd"):
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if isinstance(action, argparse._SubParsersAction):
                missing += [
                    f"{name} {c.dest}"
                    for c in action._choices_actions
                    if not (c.help or "").strip()
                ]
                continue
            if not (action.help or "").strip():
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, missing


def test_parser_knows_every_command() -> None:
    """The argument parser and the command table list the same commands."""
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert set(sub.choices) == set(COMMANDS)  # type: ignore[arg-type]


def _main_in_a_child(argv: list[str], modules: tuple[str, ...], cwd: Path | None = None) -> str:
    """The stdout of ``main(argv)`` in a fresh interpreter (``exit N`` when it exits), then
    a last line listing which of ``modules`` it imported."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from codechunkd.cli import main\n"
        f"try:\n    main({argv!r})\n"
        "except SystemExit as exc:\n    print('exit', exc.code)\n"
        f"print(sorted(m for m in {modules!r} if m in sys.modules))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, check=True
    )
    return run.stdout


def test_help_does_not_import_torch_or_lancedb() -> None:
    """``--help`` imports neither torch, LanceDB nor sentence-transformers (it stays fast)."""
    out = _main_in_a_child(["status", "--help"], ("torch", "lancedb", "sentence_transformers"))
    assert out.strip().endswith("[]")


def test_status_without_a_daemon_imports_neither_lancedb_nor_pyarrow(
    repo: Repo, index_dir: Path, indexer: Any
) -> None:
    """``status`` with no daemon prints a real index's sources from ``state.json`` (through
    ``storage.statefile``) and their HEAD from the git files (``git.headfile``) without
    importing LanceDB, Lance, pyarrow, pygit2, an embedding runtime or torch: it stays fast."""
    repo.write("a.py", "def f():\n    return 1\n")
    repo.commit()
    indexer.sync(repo.path)
    heavy = ("torch", "lancedb", "lance", "pyarrow", "pygit2", "onnxruntime", "tokenizers")
    out = _main_in_a_child(
        ["status", "--index-dir", str(index_dir)], (*heavy, "numpy", "sentence_transformers")
    )
    lines = out.strip().splitlines()
    assert str(repo.path) in out
    assert "1 files, 1 chunks" in out
    assert lines[-2:] == ["exit 13", "[]"]


def test_search_without_a_daemon_imports_no_structlog(
    repo: Repo, index_dir: Path, indexer: Any
) -> None:
    """``search`` with no daemon answers without importing structlog or asyncio (~0.1
    CPU-s of a command that logs nothing): its loggers come from ``logs.get_logger``."""
    repo.write("a.py", "def parse_quokka():\n    return 1\n")
    repo.commit()
    indexer.sync(repo.path)
    argv = ["search", "--index-dir", str(index_dir), "parse quokka"]
    out = _main_in_a_child(argv, ("structlog", "asyncio"), cwd=repo.path)
    assert "parse_quokka" in out, out
    assert out.strip().splitlines()[-1] == "[]"


def test_a_lazily_configured_command_still_writes_its_warnings() -> None:
    """Under ``configure(lazy=True)`` a record below the level imports nothing; the first
    one at the level (ours or a library's, through the standard library) sets structlog up
    and is written as a JSON line on stderr, as an eagerly configured command writes it."""
    import json
    import subprocess
    import sys

    code = (
        "import logging, sys\n"
        "from codechunkd import logs\n"
        "logs.configure(level=logs.WARNING, json=True, lazy=True)\n"
        "log = logs.get_logger('codechunkd.test')\n"
        "log.info('below'); logging.getLogger('lib').info('below too')\n"
        "print('structlog' in sys.modules)\n"
        "logging.getLogger('lib').warning('from a %s', 'library')\n"
        "log.warning('ours', files=2); log.info('still below')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    records = [json.loads(line) for line in out.stderr.splitlines()]
    assert [(r["event"], r["level"], r["logger"]) for r in records] == [
        ("from a library", "warning", "lib"),
        ("ours", "warning", "codechunkd.test"),
    ]
    assert records[1]["files"] == 2


def test_codechunkd_used_as_a_library_logs_through_logging_never_to_stdout() -> None:
    """With no ``configure`` (a program importing codechunkd), records go to the standard
    library's loggers: nothing on stdout, which may be the program's own output (structlog's
    defaults print every record there); warnings reach stderr, and the host's logging set-up
    decides the rest, tracebacks included."""
    import subprocess
    import sys

    code = (
        "import logging\n"
        "from codechunkd import logs\n"
        "log = logs.get_logger('codechunkd.test')\n"
        "log.info('quiet')\n"
        "log.warning('loud', files=2)\n"
        "logging.basicConfig(level=logging.INFO, format='%(name)s %(levelname)s %(message)s')\n"
        "log.info('heard')\n"
        "try:\n"
        "    1 / 0\n"
        "except ZeroDivisionError:\n"
        "    log.exception('failed')\n"
        "print('ours')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "ours\n"
    lines = out.stderr.splitlines()
    assert lines[:3] == [
        "event='loud' files=2",
        "codechunkd.test INFO event='heard'",
        "codechunkd.test ERROR event='failed'",
    ]
    assert lines[-1] == "ZeroDivisionError: division by zero"
    assert "quiet" not in out.stderr


def test_every_test_says_what_it_proves() -> None:
    """Every test function has a docstring (STYLE.md): a test without one is found here."""
    import ast

    root = Path(__file__).parents[1]
    missing = []
    for path in sorted((root / "tests").rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if node.name.startswith("test") and ast.get_docstring(node) is None:
                missing.append(f"{path.relative_to(root)}:{node.lineno} {node.name}")
    assert not missing, "tests without a docstring:\n" + "\n".join(missing)
