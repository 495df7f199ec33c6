"""Perl, CMake, Tcl and Vim script chunk by their definitions, and a scope without a body
(``mod a;``, ``namespace App\\Http;``, ``package Foo;``) is module code that, in PHP, C# and
Perl, names the definitions after it."""

from __future__ import annotations

from collections.abc import Sequence

from tests.chunking.conftest import Checker

from codechunkd.chunking.chunker import Chunk, CountTokens, chunk
from codechunkd.config.settings import ChunkingSettings

BUDGET = ChunkingSettings().budget

PERL = b"""package Text::Fold;
use strict;
use warnings;

our $VERSION = '1.02';

# Make a folder for lines of $width columns.
sub new {
    my ($class, %args) = @_;
    return bless { width => $args{width} || 76 }, $class;
}

=head2 fold

Folds a paragraph to the folder's width, breaking at spaces.

=cut

sub fold {
    my ($self, $text) = @_;
    my @lines;
    push @lines, $1 while $text =~ s/^(.{1,$self->{width}})(?:\\s+|$)//;
    return join "\\n", @lines;
}

package Text::Fold::Util {
    sub trim { my $s = shift; $s =~ s/^\\s+|\\s+$//g; return $s }
}

sub width { $_[0]{width} }

package Text::Fold::Compat;

sub fold_text { Text::Fold->new->fold(@_) }

1;
"""


def _defs(chunks: Sequence[Chunk]) -> dict[str, Chunk]:
    return {c.symbol: c for c in chunks if c.kind not in ("module", "block")}


def test_perl_subs_are_named_in_their_package(count_tokens: CountTokens, check: Checker) -> None:
    """Each ``sub`` is a definition named in the package statement above it (and a package
    block's subs in that block's package, not the statement's); the POD above a sub,
    across its blank line, is its doc, as a comment right above it is."""
    chunks = chunk("lib/Text/Fold.pm", PERL, count_tokens=count_tokens)
    check(PERL, chunks, BUDGET)
    defs = _defs(chunks)
    assert sorted(defs) == [
        "Text::Fold::Compat::fold_text",
        "Text::Fold::Util::trim",
        "Text::Fold::fold",
        "Text::Fold::new",
        "Text::Fold::width",
    ]
    assert {c.kind for c in defs.values()} == {"function"}
    fold = defs["Text::Fold::fold"]
    assert fold.content.startswith("=head2 fold")
    assert fold.docstring == "Folds a paragraph to the folder's width, breaking at spaces."
    assert defs["Text::Fold::new"].docstring == "Make a folder for lines of $width columns."
    assert "package Text::Fold" in fold.header
    # no chunk is a package statement alone, and the chunk holding one names the package
    assert not [c for c in chunks if c.content.strip() == "package Text::Fold::Compat;"]
    assert "Text::Fold" in chunks[0].names
    compat = defs["Text::Fold::Compat::fold_text"]
    assert compat.names == ("Text::Fold::Compat::fold_text", "Text::Fold::Compat")


CMAKE = b"""#[=======================================================================[.rst:
PushState
---------

Save and restore the variables that checks read.
#]=======================================================================]

include_guard(GLOBAL)

# Forget every variable a check reads.
macro(reset_check_state)
  set(CMAKE_REQUIRED_INCLUDES)
  set(CMAKE_REQUIRED_LIBRARIES)
endmacro()

function(push_check_state)
  math(EXPR _depth "${_depth}+1")
  set(_saved_${_depth} "${CMAKE_REQUIRED_INCLUDES}" PARENT_SCOPE)
endfunction()
"""


def test_cmake_functions_and_macros_are_definitions(
    count_tokens: CountTokens, check: Checker
) -> None:
    """``function(name …)`` and ``macro(name …)`` are definitions named by their first
    argument, the comment above one its doc."""
    chunks = chunk("cmake/PushState.cmake", CMAKE, count_tokens=count_tokens)
    check(CMAKE, chunks, BUDGET)
    defs = _defs(chunks)
    assert {s: c.kind for s, c in defs.items()} == {
        "reset_check_state": "macro",
        "push_check_state": "function",
    }
    assert defs["reset_check_state"].docstring == "Forget every variable a check reads."
    assert defs["push_check_state"].content.endswith("endfunction()")


TCL = b"""# parray: print the contents of a global array on stdout.

namespace eval ::util {}

proc ::util::parray {a {pattern *}} {
    upvar 1 $a array
    foreach name [lsort [array names array $pattern]] {
        puts stdout [format "%s(%s) = %s" $a $name $array($name)]
    }
}

proc lmax {list} {
    return [lindex [lsort -integer $list] end]
}
"""


def test_tcl_files_are_tcl_and_procs_are_definitions(
    count_tokens: CountTokens, check: Checker
) -> None:
    """A ``.tcl`` file is read as Tcl, not text, and each ``proc`` is a definition."""
    chunks = chunk("lib/util.tcl", TCL, count_tokens=count_tokens)
    check(TCL, chunks, BUDGET)
    assert {c.language for c in chunks} == {"tcl"}
    assert {s: c.kind for s, c in _defs(chunks).items()} == {
        "::util::parray": "function",
        "lmax": "function",
    }


VIM = b"""" Folding for reStructuredText.

function! s:CacheFold() abort
  let b:fold_cache = {}
  return b:fold_cache
endfunction

function RstFold#GetFold()
  return s:CacheFold()
endfunction
"""


def test_vim_functions_are_named(count_tokens: CountTokens, check: Checker) -> None:
    """A Vim script function is a definition with its name (the grammar nests it)."""
    chunks = chunk("autoload/RstFold.vim", VIM, count_tokens=count_tokens)
    check(VIM, chunks, BUDGET)
    assert {s: c.kind for s, c in _defs(chunks).items()} == {
        "s:CacheFold": "function",
        "RstFold#GetFold": "function",
    }


def test_rust_module_declarations_are_one_chunk(count_tokens: CountTokens, check: Checker) -> None:
    """A ``mod.rs`` of ``pub mod x;`` lines is one chunk of module code, not one chunk per
    line; a module with a body stays a scope."""
    src = b"".join(b"pub mod part%d;\n" % i for i in range(20)) + (
        b"\npub use part0::Thing;\n\nmod inner {\n    pub fn helper() -> u32 { 1 }\n}\n"
    )
    chunks = chunk("src/parts/mod.rs", src, count_tokens=count_tokens)
    check(src, chunks, BUDGET)
    assert chunks[0].kind == "module"
    assert chunks[0].content.startswith("pub mod part0;\npub mod part1;")
    assert "pub mod part19;" in chunks[0].content
    assert [c.symbol for c in chunks if c.kind == "function"] == ["inner::helper"]


def test_statement_namespaces_name_what_follows(count_tokens: CountTokens, check: Checker) -> None:
    """PHP's ``namespace App\\Http;`` and C#'s ``namespace Foo.Bar;`` name the classes after
    them by the whole namespace, as a namespace with a body does, and are no chunk alone."""
    php = (
        b"<?php\nnamespace App\\Http;\n\nuse Foo\\Bar;\n\n"
        b"class Kernel {\n    public function handle($r) { return $r; }\n}\n\n"
        b"function helper() { return 2; }\n"
    )
    chunks = chunk("app/Http/Kernel.php", php, count_tokens=count_tokens)
    check(php, chunks, BUDGET)
    assert chunks[0].content.startswith("<?php\nnamespace App\\Http;")
    symbols = {c.symbol for c in chunks if c.kind in ("class", "method", "function")}
    assert symbols == {"App\\Http::Kernel", "App\\Http::Kernel::handle", "App\\Http::helper"}

    cs = b"namespace Foo.Bar;\n\npublic class K {\n    public int M() { return 1; }\n}\n"
    block = b"namespace Foo.Bar {\n" + cs.split(b";\n\n", 1)[1] + b"}\n"
    for src in (cs, block):
        chunks = chunk("K.cs", src, count_tokens=count_tokens)
        check(src, chunks, BUDGET)
        symbols = {c.symbol for c in chunks if c.kind in ("class", "method")}
        assert symbols == {"Foo.Bar.K", "Foo.Bar.K.M"}


def test_long_pod_is_cut_between_paragraphs_never_after_a_heading(
    count_tokens: CountTokens, check: Checker
) -> None:
    """Documentation after ``__END__`` longer than the budget is cut between paragraphs,
    each heading or item kept with the paragraph after it (line cuts put ``=item`` at a
    chunk's end and began chunks mid-sentence), each piece a ``section`` named for the
    heading it opens or goes on with."""
    items = "".join(
        f"=item C<option_{i}>\n\nSets option {i} of the folder, which changes how lines\n"
        f"are broken and measured when the text is folded.\n\n"
        for i in range(12)
    )
    pod = (
        "=head1 NAME\n\nText::Fold - fold paragraphs\n\n=head1 OPTIONS\n\n=over 4\n\n"
        f"{items}=back\n\n=head1 AUTHOR\n\nSomeone.\n\n=cut\n"
    )
    src = PERL + b"__END__\n\n" + pod.encode()
    budget = 300
    chunks = chunk(
        "lib/Text/Fold.pm", src, ChunkingSettings(budget=budget), count_tokens=count_tokens
    )
    check(src, chunks, budget)
    doc = [c for c in chunks if c.start_byte >= src.index(b"=head1 NAME")]
    assert len(doc) >= 4
    # each is the section it opens or goes on with (not ``fold``, whose POD ended at ``=cut``)
    named = [(c.kind, c.symbol) for c in chunks if c.end_byte > src.index(b"__END__")]
    assert named[0] == ("section", "NAME") and set(named[1:]) == {("section", "OPTIONS")}
    for c in doc:
        assert not c.content.splitlines()[-1].startswith(("=head", "=item", "=over")), c.content
        before = src[: c.start_byte]
        assert before.endswith(b"\n\n"), c.content[:40]  # a paragraph's start
