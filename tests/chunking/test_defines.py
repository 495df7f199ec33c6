"""Names bound outside any function are definitions (chunking/refs_defines.py): module
constants and variables, class attributes and fields, in each language that has rules.

Python from the standard library as installed (real code nobody here wrote); the other
languages from short excerpts of the shapes their code uses.
"""

from __future__ import annotations

import json
from pathlib import Path

from codechunkd.chunking.chunker import chunk


def _defined(path: str, text: str | bytes) -> dict[str, int]:
    """Qualified name -> line of each ``defines`` ref of the file's chunks."""
    data = text.encode() if isinstance(text, str) else text
    return {r.qualifier: r.line for c in chunk(path, data) for r in c.refs if r.kind == "defines"}


PYTHON = '''"""Settings."""
import os
from fast import speedup as _speedup

__all__ = ["MAX"]
MAX = 3
TIMEOUT: float = 2.5
LOW, HIGH = 1, 9
if os.name == "nt":
    SEP = "\\\\"
else:
    SEP = "/"
try:
    from fast import speedup
except ImportError:
    speedup = None
_ = None
FIRST = SECOND = 0


class Color:
    RED = 1
    name: str

    class Inner:
        DEPTH = 2

    def paint(self):
        local = 1
        self.shade = local
        return local


def helper():
    INNER = 1

    class Local:
        HIDDEN = 1

    return INNER, Local
'''


def test_python_module_constants_and_class_attributes() -> None:
    """Module-level names (annotated, unpacked, chained, in ``if``/``else`` and ``try`` arms) and
    class attributes (nested classes qualified by both); not a function's locals, nor a
    class defined in a function, nor ``self.x`` in a method, dunders, ``_``, or a name the
    file imports (``speedup``: its fallback is the same name)."""
    got = _defined("settings.py", PYTHON)
    assert got == {
        "MAX": 6,
        "TIMEOUT": 7,
        "LOW": 8,
        "HIGH": 8,
        "SEP": 12,
        "FIRST": 18,
        "SECOND": 18,
        "Color.RED": 22,
        "Color.name": 23,
        "Color.Inner.DEPTH": 26,
    }


def test_python_standard_library_constants() -> None:
    """``json/decoder.py`` as installed: its flags, its constants and the regular
    expressions it compiles at module level, each where it is bound."""
    path = Path(json.__file__).parent / "decoder.py"
    source = path.read_bytes()
    got = _defined("json/decoder.py", source)
    lines = source.decode().splitlines()
    for name in ("FLAGS", "NaN", "PosInf", "NegInf", "BACKSLASH", "STRINGCHUNK", "WHITESPACE"):
        assert name in got, name
        assert lines[got[name] - 1].startswith(f"{name} ="), name
    assert "JSONDecoder" not in got  # a class: the chunker's definition, not a value


def test_go_package_constants_and_variables() -> None:
    """A package's ``const`` and ``var``, alone or in a group; not ``_``, nor a function's
    ``const`` and ``var``."""
    src = """package p

import "errors"

const Max = 10

var ErrClosed = errors.New("closed")

var (
	count = 0
	_     = count
)

func F() int {
	const local = 1
	var x = local
	return x
}
"""
    assert _defined("p.go", src) == {"Max": 5, "ErrClosed": 7, "count": 10}


def test_typescript_and_javascript_top_level_and_class_fields() -> None:
    """Top-level ``const``/``let``/``var`` (exported or not), class fields, an interface's
    properties (its methods are the chunker's) and an enum's members; a function's locals
    are not, nor a variable given a ``require`` (an import's name)."""
    ts = """import { a } from "./a";
export const MAX = 10;
let counter = 0;
export const routes = [a];
class Store {
  static DEFAULT = 1;
  private items: number[] = [];
  load() { const inner = 2; return inner; }
}
function f() { const hidden = 1; return hidden; }
interface Options { timeout: number; retry?: boolean; run(): void }
enum Level { Info, Warn = 2 }
"""
    assert _defined("store.ts", ts) == {
        "MAX": 2,
        "counter": 3,
        "routes": 4,
        "Store.DEFAULT": 6,
        "Store.items": 7,
        "Options.timeout": 11,
        "Options.retry": 11,
        "Level.Info": 12,
        "Level.Warn": 12,
    }
    js = """const fs = require("fs");
var cache = {};
class Pool { size = 4; }
module.exports = { cache };
"""
    assert _defined("pool.js", js) == {"cache": 2, "Pool.size": 3}


def test_rust_java_and_c_constants() -> None:
    """Rust's top-level ``const`` and ``static``; Java's fields, enum constants (in their
    enum, in its class) and an interface's constants; a C ``#define`` with a value, not an
    include guard nor a macro with parameters (a definition of the chunker's)."""
    rust = 'const MAX: u32 = 10;\nstatic NAME: &str = "x";\nfn f() { let y = 1; }\n'
    assert _defined("lib.rs", rust) == {"MAX": 1, "NAME": 2}
    java = """class Limits {
  static final int MAX = 1;
  private String name;
  enum Mode { FAST, SLOW }
  void m() { int local = 2; }
}
interface Api { int VERSION = 2; }
"""
    assert _defined("Limits.java", java) == {
        "Limits.MAX": 2,
        "Limits.name": 3,
        "Limits.Mode.FAST": 4,
        "Limits.Mode.SLOW": 4,
        "Api.VERSION": 7,
    }
    c = "#ifndef X_H\n#define X_H\n#define MAX_PATH 260\n#define SQR(x) ((x) * (x))\n#endif\n"
    assert _defined("x.h", c) == {"MAX_PATH": 3}


def test_ruby_constants_in_their_modules_and_classes() -> None:
    """Ruby's constants, qualified by the modules and classes around them as Ruby's
    definitions are (``Shop.Cart.LIMIT``; ``class Shop::Order`` is ``Order``); not a
    method's variables."""
    src = """module Shop
  VERSION = "1.0"
  class Cart
    LIMIT = 10
    def total
      count = 1
    end
  end
end
TOP = 3
class Shop::Order
  STATES = []
end
"""
    assert _defined("shop.rb", src) == {
        "Shop.VERSION": 2,
        "Shop.Cart.LIMIT": 4,
        "TOP": 10,
        "Order.STATES": 12,
    }
