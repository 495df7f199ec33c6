"""How the reference graph reads names and module paths (``storage/refgraph.py``).

Owns ``canonical`` (one form for a qualified symbol: Rust's ``impl Span::new`` is
``Span.new``), each language's naming rules (``in_same_module``: which definitions a bare
name reaches; ``php_class``) and ``ModulePaths``: the files of a source that a module path
written in a file can name, per language (Python dotted and relative modules, TS/JS
relative paths and index files, Go package folders, Rust ``crate::``/``self::``/``super::``
paths and ``mod.rs``, Java packages, PHP namespaces, Ruby ``require`` paths, C and C++
``#include`` paths).  It must not resolve a name to a definition (refgraph.py).
"""

from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from collections.abc import Container, Iterable
from typing import Final

from codechunkd.chunking.predeclared import NODE_MODULES

__all__ = [
    "BY_NAME",
    "CASELESS",
    "EXACT",
    "IMPORTED",
    "SELF",
    "ModulePaths",
    "canonical",
    "family",
    "in_same_module",
    "of_class",
    "php_class",
    "short_name",
    "used_name",
]

EXACT: Final = "exact"
IMPORTED: Final = "imported"
BY_NAME: Final = "by-name"
SELF: Final = frozenset(
    {"", "self", "cls", "this", "Self", "super()", "super", "$self", "$class", "__PACKAGE__"}
    | {"$this", "static"}  # PHP (``self::`` above)
)
"""What a member is written on to mean the enclosing class's (or, empty, written bare)."""

_EXT: Final = re.compile(
    r"\.(py|pyi|js|mjs|cjs|jsx|ts|mts|cts|tsx|go|rs|java|pm|pl|sh|bash|php|cmake|rb)$"
)
#: C, C++ and CUDA files (``ModulePaths.files`` reads their ``#include`` paths); headers.
_C_HEADERS: Final = frozenset({"h", "hh", "hpp", "hxx", "h++", "ipp", "inl", "tpp", "cuh"})
_C_SOURCES: Final = ("c", "cc", "cpp", "cxx", "c++", "cu")
_C_FILES: Final = _C_HEADERS | frozenset(_C_SOURCES)
_INDEX_STEMS: Final = ("/__init__", "/index", "/mod", "/lib", "/main")
_JS_FILES: Final = frozenset({"js", "mjs", "cjs", "jsx", "ts", "mts", "cts", "tsx"})
_MAX_ALIASES: Final = 1000
"""At most this many ``tsconfig.json`` mappings in one folder (each import under it may try
each: a folder of hostile configs is not read whole per import)."""
#: Where a package's entry is looked for when its ``package.json`` names none that the
#: source has: Node's ``index.js``, and the usual places of a TypeScript package's source.
_INDEXES: Final = ("index", "src/index", "lib/index")
#: The first folder of a built entry (``dist/index.js``), which ``src/`` is the source of.
_BUILT: Final = re.compile(r"^(?:dist|build|lib|out|esm|cjs|es|module|types)/")
#: A TypeScript declaration file's ``.d`` (``index.d.ts``), whose source is ``index.ts``.
_DECLARATION: Final = re.compile(r"\.d(?=\.[mc]?ts$)")
_IMPL: Final = re.compile(
    r"\bimpl\s+(?:[\w:]+\s+for\s+)?[&*]*\s*(?:mut\s+|dyn\s+)*(?:[a-z_]\w*::)*(\w+)"
)


_FAMILIES: Final = {
    "javascript": "js", "typescript": "js", "tsx": "js",
    "c": "c", "cpp": "c", "cuda": "c", "objc": "c",
    "java": "jvm", "kotlin": "jvm", "scala": "jvm", "groovy": "jvm",
}  # fmt: skip


def short_name(symbol: str) -> str:
    """``DataLoader.load`` -> ``load``; ``a::b`` -> ``b``; ``Install > Linux`` stays."""
    for sep in (".", "::"):
        symbol = symbol.rsplit(sep, 1)[-1]
    return symbol


CASELESS: Final = frozenset({"cmake"})
"""Languages whose names are one name in any case (CMake's commands): their definitions
and uses are recorded by the name in lower case."""


def used_name(symbol: str, language: str) -> str:
    """The name the uses of the definition ``symbol`` are recorded by: its ``short_name``,
    in lower case in a language of :data:`CASELESS`."""
    name = short_name(symbol)
    return name.lower() if language in CASELESS else name


def family(language: str) -> str:
    """The languages whose code can name each other's definitions (TypeScript and
    JavaScript; C, C++ and Objective-C; the JVM's): a by-name guess stays within one.
    A Python ``x.size()`` never calls a C++ ``size``."""
    return _FAMILIES.get(language, language)


def php_class(name: str) -> bool:
    """A PHP class, interface or trait, by PSR-1's names (``StudlyCaps``; methods and
    functions are ``camelCase`` or ``snake_case``): what a namespace's bare names can mean
    besides its functions, which a file's namespace and a class's members, both qualified
    with ``.``, do not tell apart."""
    return name[:1].isupper()


def in_same_module(language: str, owner: str, symbol: str, qualifier: str) -> bool:
    """Whether code in ``owner`` (a canonical symbol) names the definition ``symbol``
    (written ``qualifier``) by its bare name, as a member of its module.  Rust: a function
    of the module it is written in (``tests::helper`` called from ``tests::it_works``); a
    module is lower-case, a type or trait is not (Rust's naming rules), and a type's
    members are not bare names.  Perl: a sub of its package (``fileparse`` called from
    ``File::Basename::basename``): a package's subs call each other by bare name.  PHP: a
    class of a namespace it is written in (a bare call is never a method).  Python: a
    function nested in a function the code is in (``define.do_it`` called from
    ``define.wrap``), a function being lower-case (PEP 8) where a class, whose members are
    not bare names, is not; JavaScript and TypeScript likewise (``share.reset`` called from
    ``share.resetAndUnsubscribe``: a closure sees the functions of the scopes around it)."""
    scope = symbol.split(".")[:-1]
    if language == "python" or _FAMILIES.get(language) == "js":
        inside = owner.split(".")[: len(scope)] == scope
        return bool(scope) and scope[-1].lstrip("_")[:1].islower() and inside
    if language == "perl":
        return scope == owner.split(".")[:-1]
    if language == "php":
        return php_class(symbol.rpartition(".")[2]) and owner.split(".")[: len(scope)] == scope
    if language != "rust" or "impl " in qualifier or not scope:
        return False
    return scope[-1][:1].islower() and owner.split(".")[: len(scope)] == scope


def of_class(symbol: str) -> bool:
    """Whether ``symbol`` is a member of a class, by the capital of what holds it
    (``Group.group``; ``define.do_it`` is a function nested in a function)."""
    return symbol.rpartition(".")[0].rpartition(".")[2].lstrip("_")[:1].isupper()


def canonical(symbol: str, name: str = "") -> str:
    """A qualified symbol in one form, ``Type.member``: Rust's ``impl Span::new``,
    ``impl fmt::Display for Span<T>::fmt`` and ``tests::alt`` become ``Span.new``,
    ``Span.fmt`` and ``tests.alt`` (``name``, the defined name, tells the member from the
    type's path); any other language's symbols are already so."""
    if "::" not in symbol and "impl " not in symbol:
        return symbol
    s = _without_generics(symbol)
    tail = ""
    if name and s.endswith("::" + name):
        s, tail = s[: -len(name) - 2], name
    s = _IMPL.sub(lambda m: m.group(1), s).replace("::", ".")
    return f"{s}.{tail}" if s and tail else s or tail


def _without_generics(s: str) -> str:
    """``s`` without its ``<…>`` pairs (nested ones inside), an unmatched ``<`` or ``>``
    kept, in one pass: removing the innermost pair until none was left took time quadratic
    in the nesting (a 16 KB ``impl`` 3,000 generics deep: 23 s for a repository map)."""
    if "<" not in s:
        return s
    opens: list[int] = []
    cuts: list[tuple[int, int]] = []  # the outermost pairs so far, in order
    for k, c in enumerate(s):
        if c == "<":
            opens.append(k)
        elif c == ">" and opens:
            start = opens.pop()
            while cuts and cuts[-1][0] > start:  # the pairs inside this one
                cuts.pop()
            cuts.append((start, k + 1))
    kept, at = [], 0
    for start, end in cuts:
        kept.append(s[at:start])
        at = end
    return "".join(kept) + s[at:]


def _stem(path: str) -> str:
    stem = _EXT.sub("", path)
    for tail in _INDEX_STEMS:
        if stem.endswith(tail):
            return stem[: -len(tail)]
    return stem


def _installed(folders: Container[str], here: str, name: str) -> str | None:
    """Of the folders that declare package ``name``, the one Node's lookup from the folder
    ``here`` reaches first: ``node_modules/<name>`` in ``here`` or the nearest folder above
    it; None when no such copy is installed."""
    at = here
    while True:
        installed = posixpath.join(at, "node_modules", name) if at else f"node_modules/{name}"
        if installed in folders:
            return installed
        if not at:
            return None
        at = posixpath.dirname(at)


def _workspace(folders: Iterable[str]) -> str:
    """The folder a package's name means where no installed copy is above the importer: one
    that is no installed copy (a workspace's), else the first by path."""
    own = sorted(f for f in folders if "node_modules" not in f.split("/"))
    return (own or sorted(folders))[0]


def _suffixes(stem: str) -> Iterable[str]:
    parts = stem.split("/")
    for i in range(len(parts)):
        yield "/".join(parts[i:])


class ModulePaths:
    """The files of each source by every path a module can be written as."""

    def __init__(
        self,
        files: Iterable[tuple[str, str]],
        packages: dict[tuple[str, str], list[tuple[str, str]]] | None = None,
    ) -> None:
        """``packages``: for each (source, package name) the (``package.json`` path, entry)
        pairs its ``package`` rows give, in their order, and for each (source, pattern) a
        ``tsconfig.json``'s (path, what it maps to) (chunking/refs_package.py)."""
        #: (source, package name) -> each folder declaring it -> its entries, in their order
        self._packages: dict[tuple[str, str], dict[str, list[str]]] = defaultdict(dict)
        self._workspaces: dict[tuple[str, str], str] = {}  # ``_workspace``'s, once a name
        #: (source, a config's folder) -> its (prefix, suffix, path) mappings
        self._aliases: dict[tuple[str, str], list[tuple[str, str | None, str]]] = defaultdict(list)
        for (src, name), rows in (packages or {}).items():
            for manifest, entry in rows:
                folder, _, base = manifest.rpartition("/")
                if base == "package.json":
                    self._packages[(src, name)].setdefault(folder, []).append(entry)
                elif len(mapped := self._aliases[(src, folder)]) < _MAX_ALIASES:
                    prefix, star, suffix = name.partition("*")  # ``"@/*": ["./src/*"]``
                    mapped.append((prefix, suffix if star else None, entry))
        self._modules: dict[tuple[str, str], set[str]] = defaultdict(set)
        self._dirs: dict[tuple[str, str], set[str]] = defaultdict(set)
        for src, path in files:
            for suffix in _suffixes(_stem(path)):
                self._modules[(src, suffix)].add(path)
            directory = posixpath.dirname(path)
            for suffix in _suffixes(directory) if directory else ("",):
                self._dirs[(src, suffix)].add(path)

    def files(self, src: str, path: str, module: str) -> set[str]:
        """Files of ``src`` that the module path written in ``path`` can name."""
        lang = path.rsplit(".", 1)[-1]
        if lang in _C_FILES:
            return self._include(src, path, module)
        if lang in _JS_FILES and module.startswith("."):
            rel = posixpath.normpath(posixpath.join(posixpath.dirname(path), module))
            return self._modules.get((src, _stem(rel)), set())
        if lang in _JS_FILES:
            if module.startswith("node:") or module.partition("/")[0] in NODE_MODULES:
                return set()  # Node's own (``path``, ``fs/promises``), not a file here
            found = self._package(src, path, module)
            if found is not None:
                return found
        if lang == "go":
            for cut in range(module.count("/") + 1):
                key = module.split("/", cut)[-1]
                if (src, key) in self._dirs:
                    return self._dirs[(src, key)]
            return set()
        if lang == "rb" and module.startswith(("./", "../")):  # ``require_relative``
            rel = posixpath.normpath(posixpath.join(posixpath.dirname(path), module))
            return self._modules.get((src, _stem(rel + ".rb")), set())
        if lang in {"py", "pyi"} and module.startswith("."):
            dots = len(module) - len(module.lstrip("."))
            base = posixpath.dirname(path)
            for _ in range(dots - 1):
                base = posixpath.dirname(base)
            rest = module.lstrip(".").replace(".", "/")
            rel = posixpath.join(base, rest) if rest else base
            return self._modules.get((src, _stem(rel + ".py")) if rel else (src, ""), set())
        if lang == "rs":
            found = self._rust(src, path, module)
            if found is not None:
                return found
            parts = [p for p in module.split("::") if p not in {"crate", "self", "super", ""}]
            key = "/".join(parts)
        elif lang in {"pm", "pl"}:  # ``Text::Wrap``: ``Text/Wrap.pm``, under any ``lib/``
            key = module.replace("::", "/")
        elif lang == "php":
            return self._php(src, module)
        elif lang in {"sh", "bash", "cmake", "txt", "rb"}:  # ``source lib/common.sh``: any
            key = _EXT.sub("", module)  # ``…/lib/common.sh``; CMake's ``include(Helpers)``
        else:
            key = module.replace(".", "/")
        if not key:
            return set()
        found = self._modules.get((src, key), set())
        if not found and lang == "java":  # ``import a.b.C``: class ``C`` of package ``a.b``
            found = self._dirs.get((src, key), set())
        return found

    def _package(self, src: str, path: str, module: str) -> set[str] | None:
        """The files a bare JS/TS module (``@npmcli/arborist``, ``rxjs/operators``) names in
        ``path``: in the folder of the ``package.json`` that declares the package (the
        nearest ``node_modules/<name>`` above ``path``, as Node looks, else a workspace's
        folder), its entry file, else the entry's ``src/`` twin (``dist/index.js`` is built
        from ``src/index.ts``), else an ``index`` file; a subpath from that folder.  First,
        the file a ``tsconfig.json`` maps it to (``_aliased``).  None when neither says."""
        aliased = self._aliased(src, path, module)
        if aliased:
            return aliased
        scoped = module.startswith("@")
        parts = module.split("/")
        name = "/".join(parts[:2] if scoped else parts[:1])
        declared = self._packages.get((src, name))
        if not declared:
            return None
        folder = _installed(declared, posixpath.dirname(path), name)
        if folder is None:
            folder = self._workspaces.get((src, name)) or _workspace(declared)
            self._workspaces[(src, name)] = folder
        rest = "/".join(parts[2:] if scoped else parts[1:])
        if rest:  # ``@acme/core/util``: ``util.ts`` in the folder, or in its ``src/``
            return self._in_folder(src, folder, [rest, f"src/{rest}"])
        return self._in_folder(src, folder, [e for e in declared[folder] if e] + list(_INDEXES))

    def _aliased(self, src: str, path: str, module: str) -> set[str]:
        """The files a ``tsconfig.json`` above ``path`` maps ``module`` to (``@/lib/x`` by
        ``"@/*": ["./src/*"]`` is ``src/lib/x``): the nearest config's, its longest
        pattern first, as TypeScript picks; none when no mapping names a file."""
        folder = path
        while folder:
            folder = posixpath.dirname(folder)
            tried = []
            for prefix, suffix, target in self._aliases.get((src, folder), ()):
                if suffix is None:
                    if module == prefix:
                        tried.append((len(prefix), target))
                elif module.startswith(prefix) and module.endswith(suffix):
                    star = module[len(prefix) : len(module) - len(suffix)]
                    if star:
                        tried.append((len(prefix), target.replace("*", star)))
            for _, target in sorted(tried, key=lambda t: t[0], reverse=True):
                found = self._at(src, folder, target)
                if found:
                    return found
        return set()

    def _at(self, src: str, folder: str, rel: str) -> set[str]:
        """The files of the module at ``rel`` from ``folder`` (none outside the source)."""
        at = posixpath.normpath(posixpath.join(folder, rel))
        outside = at == ".." or at.startswith("../")
        return set() if outside else self._modules.get((src, _stem(at)), set())

    def _in_folder(self, src: str, folder: str, entries: list[str]) -> set[str]:
        """The files of the first of ``entries`` (paths from ``folder``) that the source has,
        trying each one's ``src/`` twin after it (``index.d.ts`` is read as ``index.ts``)."""
        for entry in entries:
            rel = _DECLARATION.sub("", posixpath.normpath(entry))
            if rel.startswith("../") or rel == "..":  # no file outside the package
                continue
            for key in dict.fromkeys((rel, _BUILT.sub("src/", rel, count=1))):
                found = self._at(src, folder, key)
                if found:
                    return found
        return set()

    def _php(self, src: str, module: str) -> set[str]:
        """The files of a PHP namespace or class (``App\\Http`` or ``App\\Http.Kernel``): the
        file or folder at its path, else at the path less its first parts (PSR-4 maps a
        namespace's root to any folder: ``App\\Http\\Kernel`` is ``app/Http/Kernel.php``
        or ``src/Http/Kernel.php``); a file ``require``d by its path, any file whose path ends
        so."""
        if module.endswith(".php"):  # ``require_once 'google/appengine/runtime/Memcached.php'``
            return self._modules.get((src, _EXT.sub("", module)), set())
        parts = [p for p in re.split(r"[\\.]", module) if p]
        for cut in range(len(parts)):
            key = (src, "/".join(parts[cut:]))
            found = self._modules.get(key) or self._dirs.get(key)
            if found:
                return found
        return set()

    def _include(self, src: str, path: str, module: str) -> set[str]:
        """The files an ``#include`` in ``path`` names: the one at ``module`` from the
        including file's folder (a quoted include's first place; an angle one rarely has a
        file there), else every file whose path ends with ``module`` (``include/arrow/
        status.h`` for ``arrow/status.h``: the include folders are the build's, unknown here)."""
        here = posixpath.normpath(posixpath.join(posixpath.dirname(path), module))
        if here in self._modules.get((src, here), ()):
            return {here}
        parts = posixpath.normpath(module).split("/")
        while parts and parts[0] in {"..", "."}:
            parts = parts[1:]
        return self._modules.get((src, "/".join(parts)), set()) if parts else set()

    def companions(self, src: str, header: str) -> set[str]:
        """The source files that define what a C or C++ header declares, by their name: the
        header's stem with a source extension in its folder (``arrow/status.cc`` for
        ``arrow/status.h``), else the one such file of the source, if only one."""
        folder, _, base = header.rpartition("/")
        stem, _, ext = base.rpartition(".")
        if ext not in _C_HEADERS or not stem:
            return set()
        anywhere: set[str] = set()
        for sext in _C_SOURCES:
            named = self._modules.get((src, f"{stem}.{sext}"), set())
            beside = f"{folder}/{stem}.{sext}" if folder else f"{stem}.{sext}"
            if beside in named:
                return {beside}
            anywhere |= named
        return anywhere if len(anywhere) == 1 else set()

    def _rust(self, src: str, path: str, module: str) -> set[str] | None:
        """The files of a Rust path that starts at ``crate``, ``self`` or ``super``, read
        from where ``path`` sits: ``crate`` is the folder of the nearest ``lib.rs`` or
        ``main.rs`` above it, ``self`` the file's own module (``src/hir/mod.rs`` and
        ``src/hir.rs`` are ``src/hir``), each ``super`` one module up.  None for any other
        path (an outside crate, or a module in scope: looked up by its name)."""
        parts = module.split("::")
        if parts[0] not in {"crate", "self", "super"}:
            return None
        here = _EXT.sub("", path)
        if posixpath.basename(here) in {"mod", "lib", "main"}:
            here = posixpath.dirname(here)
        if parts[0] == "crate":
            base = posixpath.dirname(path)
            while not self._roots(src, base):
                if not base:
                    return set()
                base = posixpath.dirname(base)
            parts = parts[1:]
            if not parts:
                return self._roots(src, base)
        else:
            base = here
            if parts[0] == "self":
                parts = parts[1:]
            while parts and parts[0] == "super":
                base, parts = posixpath.dirname(base), parts[1:]
        stem = "/".join([base, *parts] if base else parts)
        return self._modules.get((src, stem), set()) if stem else self._roots(src, "")

    def _roots(self, src: str, folder: str) -> set[str]:
        """The crate roots (``lib.rs``, ``main.rs``) in ``folder``."""
        files = self._dirs.get((src, folder), set())
        return {
            f
            for f in (posixpath.join(folder, "lib.rs"), posixpath.join(folder, "main.rs"))
            if f in files
        }
