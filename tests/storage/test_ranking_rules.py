"""The ranking stage's rules (storage/ranking.py and the symbol rules of search.py), each
on a real index with the real model, and each shown to change the order when switched off
by name."""

from __future__ import annotations

import pytest
from tests.conftest import finishes_within, index_of

from codechunkd.errors import ConfigError
from codechunkd.storage import ranking
from codechunkd.storage.reader import Index
from codechunkd.storage.symbols import SYMBOL_EXACT_BOOST, code_names, symbol_query

CART = """\
def apply_discount(cart, code):
    rate = DISCOUNTS.get(code, 0)
    for line in cart.lines:
        line.price = line.price * (1 - rate)
    return cart
"""

CART_TEST = """\
def test_apply_discount_to_the_cart():
    cart = make_cart(prices=[10, 20])
    apply_discount(cart, "SAVE10")
    assert [line.price for line in cart.lines] == [9, 18]
"""

INVOICE = "".join(
    f"""
def invoice_sales_tax_{n}(invoice):
    total = sum(line.amount for line in invoice.lines)
    return round(total * invoice.tax_rate, 2)
"""
    for n in range(3)
)

TAX = """\
def tax_of_an_order(order):
    return sum(item.amount * order.rate for item in order.items)
"""

FILLER = "".join(
    f"""
def where_widget_{n}_is_defined():
    \"\"\"Tells where the widget number {n} is defined: widgets are defined in many places.\"\"\"
    return WIDGET_PLACES[{n}]
"""
    for n in range(130)
)

ZORB = """\
class ZorbWidget:
    \"\"\"Reads comma-separated rows from a spreadsheet export and totals each column.\"\"\"

    def read_rows(self, stream):
        reader = csv.reader(stream, delimiter=",")
        header = next(reader)
        return [dict(zip(header, row)) for row in reader]

    def column_totals(self, rows):
        totals = {}
        for row in rows:
            for key, value in row.items():
                totals[key] = totals.get(key, 0.0) + float(value or 0)
        return totals
"""

PACK = """\
def pack_files(paths, archive_path):
    with zipfile.ZipFile(archive_path, "w") as archive:
        for path in paths:
            archive.write(path)
    return archive_path
"""

PACK_DEMO = """\
def demo_pack_files_into_a_zip():
    paths = ["a.txt", "b.txt"]
    print(pack_files(paths, "demo.zip"))
"""


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory, embedder) -> Index:  # type: ignore[no-untyped-def]
    return index_of(
        tmp_path_factory.mktemp("rules"),
        {
            "shop/cart.py": CART,
            "tests/test_cart.py": CART_TEST,
            "billing/invoice.py": INVOICE,
            "billing/tax.py": TAX,
            "ui/places.py": FILLER,
            "ui/zorb.py": ZORB,
            "archive/pack.py": PACK,
            "examples/pack_demo.py": PACK_DEMO,
        },
        embedder,
    )


def test_a_test_file_ranks_below_the_code_it_tests_for_a_code_question(index: Index) -> None:
    """``test_prior`` (on by default): the test that calls ``apply_discount`` says the
    query's words as well as the function does; with the rule the function comes first, the
    test weighs half, and a question about tests leaves it be."""
    assert "test_prior" in ranking.DEFAULT_RULES
    query = "apply a discount code to the cart"
    on = index.search(query, k=5, disable=["file_saturation"])
    off = index.search(query, k=5, disable=["file_saturation", "test_prior"])
    assert on[0].path == "shop/cart.py", [h.path for h in on]
    test_on = next(h for h in on if h.path == "tests/test_cart.py")
    test_off = next(h for h in off if h.path == "tests/test_cart.py")
    assert test_on.score == pytest.approx(test_off.score * ranking.TEST_WEIGHT, abs=1e-5)
    asked = index.search("the test of apply discount on the cart", k=5)
    same = index.search("the test of apply discount on the cart", k=5, disable=["test_prior"])
    assert [h.id for h in asked] == [h.id for h in same]  # the rule stays out of it


def test_a_files_third_chunk_gives_way_to_another_files_first(index: Index) -> None:
    """``file_saturation``: three near-identical chunks of one file no longer fill the top
    before another file's best chunk."""
    query = "compute the sales tax of an invoice"
    off = [h.path for h in index.search(query, k=4, disable=["file_saturation"])]
    assert off[:3] == ["billing/invoice.py"] * 3, off  # the setup: one file fills the top
    on = [h.path for h in index.search(query, k=4)]
    assert on.index("billing/tax.py") < 2, on
    assert on.count("billing/invoice.py") >= 2  # still there, further down


def test_a_file_with_several_strong_chunks_lifts_its_best_one(index: Index) -> None:
    """``file_coherence``: the best chunk of ``billing/invoice.py``, whose three functions all
    answer, gains a share of the others' scores; the others and ``billing/tax.py``'s one
    chunk keep theirs."""
    query = "compute the sales tax of an invoice"
    off = index.search(query, k=10, disable=["file_saturation", "file_coherence"])
    on = index.search(query, k=10, disable=["file_saturation"])
    before = {h.id: h.score for h in off}
    after = {h.id: h.score for h in on}
    invoice = [h for h in off if h.path == "billing/invoice.py"]
    assert len(invoice) == 3, [h.path for h in off]  # the setup: three strong chunks
    best, *rest = invoice
    gain = after[best.id] - before[best.id]
    ceiling = ranking.COHERENCE * sum(h.score for h in rest) / sum(before.values())
    assert 0 < gain <= ceiling * (1 + 1e-6), (gain, ceiling)
    for h in [*rest, *(h for h in off if h.path == "billing/tax.py")]:
        assert after[h.id] == pytest.approx(before[h.id], abs=1e-6), h.path


def test_a_name_in_a_sentence_finds_its_definition_though_the_retriever_missed_it(
    index: Index,
) -> None:
    """``symbol_in_query`` (opt-in): a question naming ``ZorbWidget`` is answered by the class that
    defines it, found through the symbol column, though the vector ranking (130 chunks
    about where widgets are defined; the class reads spreadsheet rows) does not rank it in
    the top 10."""
    query = "where are the widget places defined, like ZorbWidget"
    off = index.search(query, k=10, mode="vector")
    assert all(h.path != "ui/zorb.py" for h in off), [h.path for h in off]
    on = index.search(query, k=10, mode="vector", enable=["symbol_in_query"])
    assert (on[0].path, on[0].symbol) == ("ui/zorb.py", "ZorbWidget")


def test_code_names_are_the_words_written_as_code() -> None:
    """Backticks, underscores, inner capitals, dots and ``::`` make a word a name."""
    assert code_names("where is HelpFormatter defined") == ["HelpFormatter"]
    assert code_names("how does `run` call parse_args") == ["run", "parse_args"]
    assert code_names("What does Foo::bar do with Context.invoke") == ["Foo::bar", "Context.invoke"]
    assert code_names("How are requests retried when the server fails") == []


def test_ranking_is_repeatable_and_rules_are_named(index: Index) -> None:
    """The same query gives the same order (ties by id); an unknown rule name is an error."""
    query = "where widgets are defined"
    first = [h.id for h in index.search(query, k=20)]
    assert first == [h.id for h in index.search(query, k=20)]
    with pytest.raises(ConfigError, match="unknown ranking rule 'no_such_rule'"):
        index.search(query, disable=["no_such_rule"])


def test_code_kept_aside_weighs_less_unless_asked_for(index: Index) -> None:
    """``path_prior`` (opt-in): an example that packs files into a zip weighs
    ``ASIDE_WEIGHT``; a question that asks for an example leaves it be."""
    query = "pack files into a zip archive"
    on = index.search(query, k=40, enable=["path_prior"])
    off = index.search(query, k=40)
    demo_on = next(h for h in on if h.path == "examples/pack_demo.py")
    demo_off = next(h for h in off if h.path == "examples/pack_demo.py")
    assert demo_on.score == pytest.approx(demo_off.score * ranking.ASIDE_WEIGHT, abs=1e-5)
    assert on[0].path == "archive/pack.py", [h.path for h in on]
    asked = "an example of packing files into a zip"
    assert [h.id for h in index.search(asked, k=5, enable=["path_prior"])] == [
        h.id for h in index.search(asked, k=5)
    ]


def test_a_question_that_names_a_symbol_is_answered_by_its_definition(index: Index) -> None:
    """``symbol``: "where is the ZorbWidget class defined" is a symbol query: the class gets
    the exact-name boost (the words around the name are not taken for a sentence)."""
    query = "where is the ZorbWidget class defined"
    on = index.search(query, k=10)
    assert (on[0].path, on[0].symbol) == ("ui/zorb.py", "ZorbWidget")
    assert on[0].score >= SYMBOL_EXACT_BOOST
    off = index.search(query, k=10, disable=["symbol"])
    assert max(h.score for h in off) < SYMBOL_EXACT_BOOST


def test_a_name_qualified_by_its_package_finds_the_definition_in_that_folder(
    index: Index,
) -> None:
    """``symbol``: ``tax.tax_of_an_order`` (Go's ``json.Unmarshal``, Python's ``os.walk``) names
    the function ``tax_of_an_order`` of ``billing/tax.py``: it gets the exact-name boost."""
    on = index.search("tax.tax_of_an_order", k=3)
    assert (on[0].path, on[0].symbol) == ("billing/tax.py", "tax_of_an_order")
    assert on[0].score >= SYMBOL_EXACT_BOOST
    off = index.search("tax.tax_of_an_order", k=3, disable=["symbol"])[0].score
    assert off < SYMBOL_EXACT_BOOST
    assert index.search("cart.tax_of_an_order", k=3)[0].score < SYMBOL_EXACT_BOOST  # no boost


SHAPE_H = """\
namespace geo {

class Circle {
 public:
  explicit Circle(double radius) : radius_(radius) {}
  double Area() const { return 3.14159 * radius_ * radius_; }

 private:
  double radius_;
};

}  // namespace geo
"""

FOLD_PM = """\
package Text::Fold;

sub fold {
    my ($text, $width) = @_;
    my @lines;
    push @lines, substr($text, 0, $width, '') while length $text > $width;
    return join "\\n", @lines, $text;
}

1;
"""

USERS_PHP = """\
<?php
namespace App\\Users;

class UserService {
    public function find($id) {
        return $this->store->get($id);
    }
}
"""

GLOSSARY = """\
# Glossary

A Circle is drawn by the shape code; to fold a text is to cut it into lines; the
UserService answers questions about users.  Circle, fold and UserService are named in
the docs, in the tests and in the examples: Circle Circle fold fold UserService.
"""


@pytest.fixture(scope="module")
def qualified(tmp_path_factory: pytest.TempPathFactory, embedder) -> Index:  # type: ignore[no-untyped-def]
    return index_of(
        tmp_path_factory.mktemp("qualified"),
        {
            "geo/shape.h": SHAPE_H,
            "lib/Text/Fold.pm": FOLD_PM,
            "src/Users/UserService.php": USERS_PHP,
            "docs/glossary.md": GLOSSARY,
        },
        embedder,
    )


@pytest.mark.parametrize(
    ("query", "symbol"),
    [
        ("Circle", "geo::Circle"),
        ("where is the Circle class defined", "geo::Circle"),
        ("fold", "Text::Fold::fold"),
        ("UserService", "App\\Users::UserService"),
        ("Circle::Area", "geo::Circle::Area"),
    ],
)
def test_a_name_finds_its_definition_qualified_with_colons(
    qualified: Index, query: str, symbol: str
) -> None:
    """``symbol``: a name asked alone finds a C++, Perl or PHP definition, whose symbol
    says its namespace, package or class with ``::`` (``geo::Circle``), as it finds a
    Python one named ``Class.method``: the exact-name boost (it matched names after ``.``
    only, and these ranked below the prose that repeats them); a constructor named as its
    class (``geo::Circle::Circle``) comes after the class."""
    on = qualified.search(query, k=5)
    assert on[0].symbol == symbol, [(h.path, h.symbol) for h in on]
    assert on[0].score >= SYMBOL_EXACT_BOOST
    off = qualified.search(query, k=5, disable=["symbol"])
    assert max(h.score for h in off) < SYMBOL_EXACT_BOOST


def test_symbol_queries_are_names_or_names_asked_for() -> None:
    """A query is a symbol query when it is a name, or a name in a "where is/find" phrase."""
    assert symbol_query("HTTPAdapter") == "HTTPAdapter"
    assert symbol_query("where is HelpFormatter defined") == "HelpFormatter"
    assert symbol_query("find the Option class") == "Option"
    assert symbol_query("Where is `Lock.acquire` implemented?") == "Lock.acquire"
    assert symbol_query("where is the Context interface declared") == "Context"
    assert symbol_query("how are requests retried") is None
    assert symbol_query("where is the code that retries requests") is None


TRANSPORT_BASE = '''\
class Transport:
    def send_all(self, data):
        """Send every byte of data over the connection, retrying partial writes until the
        whole buffer is written or the peer closes the connection."""
        raise NotImplementedError

    def close(self):
        """Close the connection."""
        pass
'''

TRANSPORT_SOCKET = """\
class SocketTransport(Transport):
    def send_all(self, data):
        # partial writes: send what is left until every byte is written
        view = memoryview(data)
        while view:
            sent = self.sock.send(view)
            view = view[sent:]
"""

STUBS_PY = '''\
import typing as t
from typing import overload


class Codec:
    @t.overload  # the decorator alone says so, whatever the body
    def encode(self, text: str) -> bytes:
        return text.encode()

    def encode(self, text):
        return text.encode()

    @overload
    def decode(self, data: bytes) -> str: ...
    @overload
    def decode(self, data: str) -> str: ...
    def decode(self, data):
        return data if isinstance(data, str) else data.decode()

    def reset(self) -> None:
        """Forget the state."""
        ...

    def __eq__(self, other):
        return NotImplemented

    def size(self) -> int:
        """The size."""
        return len(self.buffer)
'''

STUBS_TS = """\
export function onEvent(name: string, listener: Listener): Lambda
export function onEvent<K, V = any>(map: Map<K, V>, key: K, listener: Listener): Lambda
export function onEvent(target: any, key?: any, listener?: any): Lambda {
    return subscribe(target, key, listener)
}

export const run = (f: () => void) => f()

export abstract class Shape {
    abstract area(): number
    describe(): string {
        return `a shape of area ${this.area()}`
    }
}
"""

STUBS_JAVA = """\
public interface Store {
    String load(String key);
}
"""

STUBS_RUST = """\
pub trait Store {
    fn load(&self, key: &str) -> String;
    fn has(&self, key: &str) -> bool {
        !self.load(key).is_empty()
    }
}
"""


@pytest.fixture(scope="module")
def stubs(tmp_path_factory: pytest.TempPathFactory, embedder) -> Index:  # type: ignore[no-untyped-def]
    return index_of(
        tmp_path_factory.mktemp("stubs"),
        {
            "net/base.py": TRANSPORT_BASE,
            "net/sockets.py": TRANSPORT_SOCKET,
            "codec.py": STUBS_PY,
            "events.ts": STUBS_TS,
            "Store.java": STUBS_JAVA,
            "store.rs": STUBS_RUST,
        },
        embedder,
    )


def test_declarations_without_a_body_are_stubs_on_a_real_index(stubs: Index) -> None:
    """``is_stub`` on the rows the chunker wrote: overloads, abstract and interface methods,
    trait declarations and ``pass``/``...``/``NotImplementedError`` bodies are stubs; a body
    that does something, an arrow function and a trait's default method are not."""
    columns = ["path", "symbol", "kind", "language", "signature", "content", "start_line"]
    rows = stubs.store.select("kind = 'function' OR kind = 'method'", columns, limit=100)
    named: dict[tuple[str, str], list[bool]] = {}
    for r in sorted(rows, key=lambda r: (r["path"], r["start_line"])):
        named.setdefault((r["path"], r["symbol"]), []).append(ranking.is_stub(r))
    assert named[("net/base.py", "Transport.send_all")] == [True]
    assert named[("net/base.py", "Transport.close")] == [True]
    assert named[("net/sockets.py", "SocketTransport.send_all")] == [False]
    assert named[("codec.py", "Codec.decode")] == [True, True, False]  # two @overload, then it
    assert named[("codec.py", "Codec.encode")] == [True, False]
    assert named[("codec.py", "Codec.reset")] == [True]
    assert named[("codec.py", "Codec.__eq__")] == [True]
    assert named[("codec.py", "Codec.size")] == [False]
    assert named[("events.ts", "onEvent")] == [True, True, False]
    assert named[("events.ts", "run")] == [False]
    assert named[("events.ts", "Shape.area")] == [True]
    assert named[("events.ts", "Shape.describe")] == [False]
    assert named[("Store.java", "Store.load")] == [True]
    assert named[("store.rs", "Store::load")] == [True]
    assert named[("store.rs", "Store::has")] == [False]


def test_an_implementation_ranks_above_the_stub_that_describes_it(stubs: Index) -> None:
    """``stub`` (opt-in): the abstract ``Transport.send_all``, whose docstring says the query's
    words, comes first without the rule; with it, it weighs ``STUB_WEIGHT`` because a
    candidate of the same name implements it, and the implementation comes first.  A stub
    with no implementation among the candidates (``Transport.close``) keeps its score."""
    assert "stub" in ranking.OPT_IN
    query = "send every byte of data, retrying partial writes until the whole buffer is written"
    off = stubs.search(query, k=5)
    assert (off[0].path, off[0].symbol) == ("net/base.py", "Transport.send_all"), off  # setup
    on = stubs.search(query, k=5, enable=["stub"])
    assert (on[0].path, on[0].symbol) == ("net/sockets.py", "SocketTransport.send_all"), on
    by_file = ["file_coherence", "file_saturation"]  # the factor alone, not the file rules'
    off = stubs.search(query, k=5, disable=by_file)
    on = stubs.search(query, k=5, disable=by_file, enable=["stub"])
    stub_on = next(h for h in on if h.symbol == "Transport.send_all")
    stub_off = next(h for h in off if h.symbol == "Transport.send_all")
    assert stub_on.score == pytest.approx(stub_off.score * ranking.STUB_WEIGHT, abs=1e-5)
    close = "close the connection"
    close_off = stubs.search(close, k=10, disable=by_file)
    close_on = stubs.search(close, k=10, disable=by_file, enable=["stub"])
    assert "Transport.close" in [h.symbol for h in close_on]
    assert {h.symbol: h.score for h in close_on}["Transport.close"] == {
        h.symbol: h.score for h in close_off
    }["Transport.close"]


def test_a_hostile_chunk_is_judged_in_linear_time() -> None:
    """``is_stub`` reads any chunk a repository holds: 200,000 unclosed ``/*`` (a lazy scan
    for ``*/`` from each made it quadratic: 40,000 took 45 s), blank lines before a
    decorator's line, ``<`` and ``#`` lines are judged at once; the deadline is a hang
    detector, a thousand times the need."""
    code = (
        "from codechunkd.storage.ranking import is_stub\n"
        "def row(language, content):\n"
        "    sig = 'def f()' if language == 'python' else 'function f('\n"
        "    return dict(kind='function', language=language, signature=sig, content=content)\n"
        "n = 200_000\n"
        "assert is_stub(row('typescript', 'function f(' + '/*x' * n))\n"
        "assert is_stub(row('typescript', 'function f' + '<' * n + '(a): T'))\n"
        "assert not is_stub(row('python', 'def f():\\n' + '\\n' * n + 'x = 1'))\n"
        "assert is_stub(row('python', 'def f():\\n' + '#x\\n' * n + 'pass'))\n"
        "assert not is_stub(row('python', 'def f():\\n    \"\"\"' + 'x\\n' * n))\n"
    )
    finishes_within(code, 120, "judging five 200,000-line chunks")
