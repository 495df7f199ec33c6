"""C and C++ references resolved through ``#include`` (storage/refc.py).

Real git repositories, a real LanceDB index and the real model (through ``Indexer``).
"""

from __future__ import annotations

from tests.conftest import Indexer, Repo
from tests.storage.test_references import index_of

from codechunkd.config import Settings
from codechunkd.storage.reader import Index, open_index

SHAPE_H = """#pragma once

namespace geo {
class Shape {
 public:
  const char* name() const { return "shape"; }
};
}  // namespace geo
"""
CIRCLE_H = """#pragma once
#include "shape.h"

namespace geo {
class Circle : public Shape {
 public:
  explicit Circle(double r) : r_(r) {}
  double area() const;
  double radius() const { return r_; }
  static Circle Unit();
  double twice(Shape radius) const { return area() + draw(radius); }

 private:
  double r_;
};
}  // namespace geo
"""
CIRCLE_CC = """#include "geo/circle.h"

namespace geo {
double Circle::area() const { return 3.14 * radius() * radius(); }

Circle Circle::Unit() { return Circle(1.0); }
}  // namespace geo
"""
APP_CC = """#include <geo/circle.h>
#include <memory>

double total(const geo::Circle& c, geo::Circle* p) {
  geo::Circle u = geo::Circle::Unit();
  auto s = std::make_shared<geo::Circle>(2.0);
  return c.area() + p->area() + u.radius() + s->area() + c.name();
}

double guess(Thing t) { return t.area(); }

double outside(const std::vector<double>& v) { return v.area(); }
"""
SQUARE_HPP = """namespace plot {
class Square {
 public:
  double area() const { return 1.0; }
};
}  // namespace plot

double side(plot::Square q) { return q.area(); }
"""
UTIL_H = "#ifndef UTIL_H\n#define UTIL_H\nint util_len(const char* s);\n#endif\n"
UTIL_C = '#include "util.h"\n\nint util_len(const char* s) {\n  return s[0] ? 1 : 0;\n}\n'
MAIN_C = '#include <stdio.h>\n#include "util.h"\n\nint main(void) {\n  return util_len("ab");\n}\n'


def _callers(index: Index, symbol: str) -> set[tuple[str, str, str]]:
    return {(c.symbol, c.path, c.how) for c in index.callers(symbol)}


def test_cpp_methods_resolve_through_includes_and_variables_classes(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """A header declares ``geo::Circle`` (an inline ``radius``, an out-of-line ``area``
    defined in ``src/circle.cc``); ``app.cc`` includes it as ``<geo/circle.h>`` (the file
    is ``include/geo/circle.h``) and calls ``area`` on a reference, a pointer and a
    ``make_shared`` pointer, and ``Circle::Unit()`` through its namespace: each resolves
    ``imported`` to Circle's, never to ``plot::Square::area`` (same name, a file
    ``app.cc`` does not include), which only its own file calls; a method of the base
    (``c.name()``) resolves through ``class Circle : public Shape``; ``radius()`` called
    bare in ``Circle::area`` is Circle's, and ``area()`` in an inline method the one in the
    ``.cc``; a parameter named ``radius`` passed on is no use of ``Circle::radius``;
    ``t.area()`` on an unknown class guesses nothing when two classes have an ``area``;
    ``v.area()`` on a ``std::vector`` (a class the source does not define) is nobody's;
    asked as ``geo::Circle::area`` or ``Circle.area``."""
    files = {
        "include/geo/shape.h": SHAPE_H,
        "include/geo/circle.h": CIRCLE_H,
        "src/circle.cc": CIRCLE_CC,
        "app/app.cc": APP_CC,
        "plot/square.hpp": SQUARE_HPP,
    }
    index = index_of(repo, indexer, settings, files)
    [area] = index.definitions("geo::Circle::area")
    assert area.path == "src/circle.cc"
    assert _callers(index, "geo::Circle::area") == {
        ("total", "app/app.cc", "imported"),
        ("geo::Circle::twice", "include/geo/circle.h", "imported"),  # bare, in the class
    }
    assert _callers(index, "Circle.area") == _callers(index, "geo::Circle::area")
    assert _callers(index, "plot::Square::area") == {("side", "plot/square.hpp", "exact")}
    assert _callers(index, "geo::Circle::Unit") == {("total", "app/app.cc", "imported")}
    assert _callers(index, "Shape::name") == {("total", "app/app.cc", "imported")}
    assert _callers(index, "Circle::radius") == {
        ("geo::Circle::area", "src/circle.cc", "imported"),
        ("total", "app/app.cc", "imported"),
    }
    radius = {(u.chunk_symbol, u.kind) for u in index.references("Circle::radius")}
    assert ("geo::Circle::twice", "value") not in radius, radius  # the parameter ``radius``
    uses = {(u.chunk_symbol, u.kind, u.how) for u in index.references("geo::Circle")}
    assert ("total", "type", "imported") in uses, uses
    assert ("geo::Circle::Unit", "call", "imported") in uses, uses  # the class, not its ctor
    outside = {(u.name, u.how) for u in index.callees("outside")}
    assert outside == {("area", "")}, outside  # ``v.area()``: a std::vector's, not a guess
    bases = {(u.chunk_symbol, u.how) for u in index.references("Shape") if u.kind == "inherit"}
    assert bases == {("geo::Circle", "imported")}


def test_a_c_call_resolves_to_the_source_file_of_the_header_it_includes(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``main.c`` includes ``util.h``, which only declares ``util_len``: the call resolves
    ``imported`` to its definition in ``util.c`` (the header's source file, by name);
    ``printf`` from ``<stdio.h>``, which the repository does not hold, to nothing (no
    callee of ``main``)."""
    index = index_of(
        repo, indexer, settings, {"c/util.h": UTIL_H, "c/util.c": UTIL_C, "c/main.c": MAIN_C}
    )
    assert _callers(index, "util_len") == {("main", "c/main.c", "imported")}
    main = {(u.name, u.how) for u in index.callees("main")}
    assert main == {("util_len", "imported")}, main  # no ``printf``: not the source's


def test_an_include_leads_through_a_header_that_only_declares(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``util.h`` is ``#pragma once`` and a declaration: it defines nothing, so no row of
    the references table names it, yet the ``files`` table does.  The call in ``main.c``
    still resolves ``imported`` to ``util.c`` (the header's source file), both through the
    graph read in parts (a question) and through the whole graph (the map reads it), by
    the writer's store and by a reader of Lance alone."""
    header = "#pragma once\nint util_len(const char* s);\n"
    index = index_of(
        repo, indexer, settings, {"c/util.h": header, "c/util.c": UTIL_C, "c/main.c": MAIN_C}
    )
    assert _callers(index, "util_len") == {("main", "c/main.c", "imported")}
    whole = index.refs.graph()
    assert {(d.path, d.symbol) for d in whole.definitions("util_len", None)} == {
        ("c/util.c", "util_len")
    }
    assert index.refs.graph() is whole  # kept: the next question reads it
    assert _callers(index, "util_len") == {("main", "c/main.c", "imported")}
    reader = open_index(settings=settings)  # through Lance alone, as ``codechunkd refs``
    assert _callers(reader, "util_len") == {("main", "c/main.c", "imported")}
