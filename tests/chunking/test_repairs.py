"""TypeScript without semicolons: an interface's call signatures on lines of their own parse
(``chunking/repairs.py``), and the chunks follow the interfaces as written."""

from __future__ import annotations

from tests.chunking.conftest import Checker

from codechunkd.chunking import repairs
from codechunkd.chunking.chunker import CountTokens, chunk
from codechunkd.chunking.languages import get_parser
from codechunkd.config.settings import ChunkingSettings

# MobX 7's ``api/observable.ts``, as Prettier writes it with ``semi: false``
SOURCE = b"""export interface IObservableValueFactory {
    <T>(value: T, options?: CreateObservableOptions): IObservableValue<T>
    <T>(value?: T, options?: CreateObservableOptions): IObservableValue<T | undefined>
}

export interface IObservableMapFactory {
    <K = any, V = any>(): ObservableMap<K, V>
    <K, V>(initialValues?: IMapEntries<K, V>, options?: CreateObservableOptions): ObservableMap<
        K,
        V
    >
    (initialValues?: IKeyValueMap, options?: CreateObservableOptions): ObservableMap
}

export function createObservable(v: any, arg2?: any, arg3?: any) {
    if (isObservable(v)) {
        return v
    }
    return observable.box(v, arg2)
}
"""


def test_call_signatures_on_their_own_lines_keep_their_interface_whole(
    count_tokens: CountTokens, check: Checker
) -> None:
    """Each interface is one chunk named for it, and the function after them is its own:
    the second call signature closed the interface, and the rest became module code."""
    assert get_parser("typescript").parse(SOURCE).root_node.has_error  # the grammar's misreading
    chunks = chunk("src/api/observable.ts", SOURCE, count_tokens=count_tokens)
    check(SOURCE, chunks, ChunkingSettings().budget)
    assert [(c.kind, c.symbol, c.start_line, c.end_line) for c in chunks] == [
        ("interface", "IObservableValueFactory", 1, 4),
        ("interface", "IObservableMapFactory", 6, 13),
        ("function", "createObservable", 15, 20),
    ]


def test_a_repair_that_does_not_help_is_not_kept() -> None:
    """Broken code whose lines begin like signatures keeps its first tree (no fewer errors
    repaired); a tree without errors is not parsed again."""
    parser = get_parser("typescript")
    broken = b"function f( {\n    (x)\n    <T>(y)\n"
    tree = parser.parse(broken)
    assert tree.root_node.has_error
    calls: list[bytes] = []

    def parse(src: bytes):  # type: ignore[no-untyped-def]
        calls.append(src)
        return parser.parse(src)

    kept = repairs.repaired("typescript", broken, tree, parse)
    assert len(calls) == 1 and len(calls[0]) == len(broken)  # same length: offsets hold
    assert str(kept.root_node) == str(tree.root_node)
    assert repairs.repaired("typescript", broken, tree, lambda src: None) is tree  # past time
    good = parser.parse(SOURCE.replace(b"\n    <", b"\n;   <").replace(b"\n    (", b"\n;   ("))
    assert not good.root_node.has_error
    assert repairs.repaired("typescript", SOURCE, good, parse) is good and len(calls) == 1
    python = get_parser("python").parse(b"f(\n    (x)\n")
    assert python.root_node.has_error
    assert repairs.repaired("python", b"f(\n    (x)\n", python, parse) is python
    assert len(calls) == 1  # only TypeScript is repaired
