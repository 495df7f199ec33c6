"""C++ macros blanked before parsing (class heads' export macros, attribute macros, and
nothing else), in linear time on hostile lines; a forward declaration is no definition."""

from __future__ import annotations

import pytest
from tests.conftest import finishes_within

from codechunkd.chunking.chunker import chunk
from codechunkd.chunking.macros import blank_export_macros


@pytest.mark.parametrize(
    ("source", "blanked"),
    [
        (
            b"class TORCH_API Tensor : public TensorBase {};",
            b"class           Tensor : public TensorBase {};",
        ),
        (b"struct C10_API Storage final {};", b"struct         Storage final {};"),
        (
            b"class PROTOBUF_EXPORT PROTOBUF_ALIGNAS(8) Arena {};",
            b"class                                     Arena {};",
        ),
        (
            b"class ARROW_EXPORT [[nodiscard]] Status : X {};",
            b"class              [[nodiscard]] Status : X {};",
        ),
        (
            b"template <> struct TORCH_API hash<Key> {};",
            b"template <> struct           hash<Key> {};",
        ),
        (
            b"  LLVM_NODISCARD\n  char operator[](size_t I) const;\n  Q_OBJECT\npublic:\n",
            b"  //            \n  char operator[](size_t I) const;\n  //      \npublic:\n",
        ),
        (
            b"  V8_INLINE bool operator==(const Local<S>& that) const;\n",
            b"  /*     */ bool operator==(const Local<S>& that) const;\n",
        ),
        (
            b"  static V8_WARN_UNUSED_RESULT MaybeLocal<Value> New(Local<Context> c, double t);\n",
            b"  static /*                 */ MaybeLocal<Value> New(Local<Context> c, double t);\n",
        ),
        (
            b"TORCH_API C10_NODISCARD at::Tensor add(const Tensor& a);\n",
            b"/*                   */ at::Tensor add(const Tensor& a);\n",
        ),
        (
            b'  LLVM_ATTRIBUTE_DEPRECATED(x, "use y")\n  void f();\n',
            b"  //" + b" " * 35 + b"\n  void f();\n",
        ),
    ],
)
def test_the_macros_of_a_class_head_become_spaces(source: bytes, blanked: bytes) -> None:
    """Every byte keeps its offset; the macro words (and their arguments) of a class head
    turn to spaces, those before a function's type and name to a block comment, one alone
    on a line before a declaration (an attribute macro) to a line comment; attributes and
    names stay."""
    assert blank_export_macros("cpp", source) == blanked


@pytest.mark.parametrize(
    ("language", "source"),
    [
        ("cpp", b"class TORCH_API Forward;\n"),  # a declaration: no body to tell it by
        ("cpp", b"struct STAT st;\n"),  # C's ``struct TAG variable``
        ("cpp", b"class Plain : public Base {};\nclass A::B {};\n"),
        ("cpp", b"class AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA ;"),
        ("c", b"struct DNNL_API dnnl_memory { int x; };\n"),
        ("python", b"class API Foo: pass\n"),
        (
            "cpp",
            b"enum E {\n  RED,\n  DARK_RED\n};\n#define X_Y\nX_Y;\nFOO_BAR(a, (b))\nFOO_BAR \\\n",
        ),
        ("c", b"  LLVM_NODISCARD\n  char f(void);\n"),
        ("cpp", b"LARGE_INTEGER GetValue();\n  FOO_BAR x = y(1);\nTEST_F(FooTest, Bar) {\n}\n"),
    ],
)
def test_what_no_macro_marks_is_left_as_it_is(language: str, source: bytes) -> None:
    """Forward declarations, a C variable of a struct type, unmarked classes, other
    languages, an enum's last enumerator alone on its line before ``}``, a macro alone
    but without an underscore or with nested parentheses, a line continued, an upper-case
    type before a function's name alone, a statement, a test macro: the same bytes (the
    same object, nothing copied)."""
    assert blank_export_macros(language, source) is source


def test_a_marked_class_is_chunked_as_a_class_with_its_methods() -> None:
    """``class TORCH_API Foo : public Bar {…}`` is the class ``torch::jit::Foo`` and its
    methods, its text as written; the grammar alone read it as a function named ``Foo``."""
    source = (
        b"namespace torch {\nnamespace jit {\n\n"
        b"class TORCH_API Foo : public Bar {\n public:\n"
        b"  explicit Foo(int x) : x_(x) {}\n"
        b"  int get() const {\n    return x_;\n  }\n\n private:\n  int x_;\n};\n\n"
        b"}  // namespace jit\n}  // namespace torch\n"
    )
    chunks = chunk("include/foo.hpp", source)
    kinds = {(c.kind, c.symbol) for c in chunks}
    assert ("class", "torch::jit::Foo") in kinds
    assert {("method", "torch::jit::Foo::Foo"), ("method", "torch::jit::Foo::get")} <= kinds
    [cls] = [c for c in chunks if c.kind == "class"]
    assert cls.content.startswith("class TORCH_API Foo : public Bar {")


def test_a_forward_declaration_defines_nothing() -> None:
    """``class Tensor;``, ``template <typename T> class List;``, ``enum class E : int8_t;``
    and C's ``struct bar;`` are module code: ``codechunkd defs Tensor`` listed every header
    that names it ahead (299 of 1,790 class chunks in 1,500 of PyTorch's headers); the
    classes with a body stay definitions."""
    header = (
        b"namespace at {\nclass Tensor;\nstruct Generator;\n"
        b"template <typename T> class List;\nenum class ScalarType : int8_t;\n\n"
        b"class Foo {\n public:\n  int x;\n};\n}  // namespace at\n"
    )
    kinds = [(c.kind, c.symbol) for c in chunk("include/at.h", header)]
    assert [k for k in kinds if k[0] not in ("module", "")] == [("class", "at::Foo")], kinds
    kinds = [(c.kind, c.symbol) for c in chunk("bar.c", b"struct bar;\nstruct bar { int x; };\n")]
    assert [k for k in kinds if k[0] == "struct"] == [("struct", "bar")], kinds


def test_attribute_macros_on_their_own_lines_leave_the_class_whole() -> None:
    """LLVM's ``StringRef``: ``LLVM_NODISCARD`` alone on the line before a method made the
    grammar close the class there and read ``char operator[]`` as a function whose type is
    the class; every later member was scoped under ``operator[]``. Blanked, the class keeps
    its methods, its text as written; one on a method's own line is its chunk's first
    line, not the end of the chunk before."""
    source = (
        b"namespace llvm {\nclass StringRef {\npublic:\n"
        b"  /// The length.\n  LLVM_NODISCARD\n  size_t size() const { return Length; }\n\n"
        b"  LLVM_NODISCARD bool empty() const { return !Length; }\n\n"
        b"  LLVM_NODISCARD\n  char operator[](size_t Index) const {\n"
        b"    return Data[Index];\n  }\n\n"
        b"  LLVM_NODISCARD\n  std::string str() const {\n"
        b"    return std::string(Data, Length);\n  }\n"
        b"private:\n  const char *Data = nullptr;\n  size_t Length = 0;\n};\n}\n"
    )
    chunks = chunk("include/llvm/ADT/StringRef.h", source)
    methods = {c.symbol for c in chunks if c.kind == "method"}
    assert {
        "llvm::StringRef::size",
        "llvm::StringRef::operator[]",
        "llvm::StringRef::str",
    } <= methods, methods
    assert not [c.symbol for c in chunks if "operator[]::" in c.symbol]
    [empty] = [c for c in chunks if c.symbol == "llvm::StringRef::empty"]
    assert empty.content.startswith("LLVM_NODISCARD bool empty()"), empty.content
    assert empty.docstring == ""
    [size] = [c for c in chunks if c.symbol == "llvm::StringRef::size"]
    assert size.content.startswith("/// The length.\n  LLVM_NODISCARD\n  size_t size() const")
    assert size.docstring == "The length."


def test_hostile_macro_lines_are_read_in_linear_time() -> None:
    """A line of 200,000 macros, a line of 100,000 ``operator<`` and ``operator<=`` (each
    ``<`` could be read two ways: 22 of them took 3.5 s, twice as long with each more),
    200,000 macros each alone on a line, a class head of 200,000 macros: a few seconds in
    all.  The deadline is a hang detector, far above the need."""
    code = (
        "from codechunkd.chunking.macros import blank_export_macros\n"
        "for src in (b'A_B ' * 200000 + b'\\n', b'X_Y int ' + b'operator< ' * 100000,\n"
        "            b'X_Y int ' + b'operator<= ' * 100000, b'A_B\\n' * 200000,\n"
        "            b'class ' + b'A_B ' * 200000 + b'x {'):\n"
        "    assert len(blank_export_macros('cpp', src)) == len(src)\n"
    )
    finishes_within(code, 120, "blanking hostile macro lines")
