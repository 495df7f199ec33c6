"""JavaScript written as ``Foo.prototype.bar = function …`` / ``res.send = function …``: each
assigned function is a definition of its own, named without ``prototype`` and ``exports``."""

from __future__ import annotations

from tests.chunking.conftest import Checker

from codechunkd.chunking.chunker import CountTokens, chunk
from codechunkd.config.settings import ChunkingSettings

BUDGET = ChunkingSettings().budget

SOURCE = b"""'use strict'
module.exports = Yallist

function Yallist (list) {
  this.head = null
  this.length = 0
}

/**
 * Unlink a node from the list and return the node after it.
 */
Yallist.prototype.removeNode = function (node) {
  var next = node.next
  node.list = null
  this.length--
  return next
}

Yallist.prototype.push = function () {
  for (var i = 0, l = arguments.length; i < l; i++) {
    push(this, arguments[i])
  }
  return this.length
}

exports.parse = async (text) => {
  return JSON.parse(text)
}

res.send = function send (body) {
  return this.end(body)
}

module.exports.format = function (obj) {
  return String(obj)
}

module.exports = function plain () { return 1 }
count = function () { return 2 }
"""


def test_functions_assigned_to_properties_are_named_definitions(
    count_tokens: CountTokens, check: Checker
) -> None:
    """Each ``x.y = function`` or arrow function is a function chunk with its signature and
    its doc comment; ``module.exports = function`` and a plain variable's function stay
    module code (no property names them)."""
    chunks = chunk("lib/yallist.js", SOURCE, count_tokens=count_tokens)
    check(SOURCE, chunks, BUDGET)
    functions = {c.symbol: c for c in chunks if c.kind == "function"}
    assert sorted(functions) == [
        "Yallist",
        "Yallist.push",
        "Yallist.removeNode",
        "format",
        "parse",
        "res.send",
    ]
    remove = functions["Yallist.removeNode"]
    assert remove.signature == "Yallist.prototype.removeNode = function (node)"
    assert remove.docstring == "Unlink a node from the list and return the node after it."
    assert remove.content.startswith("/**")
    assert functions["parse"].content.startswith("exports.parse = async (text) =>")
    last = chunks[-1]
    assert last.kind == "module" and "count = function" in last.content


def test_typescript_reads_assigned_functions_alike(count_tokens: CountTokens) -> None:
    """TypeScript shares the rules: ``Observable.prototype.pipe = function …`` is
    ``Observable.pipe``."""
    src = (
        b"Observable.prototype.pipe = function (this: Observable<unknown>, ...ops: any[]) {\n"
        b"  return ops.reduce((x, f) => f(x), this);\n};\n"
    )
    chunks = chunk("src/observable.ts", src, count_tokens=count_tokens)
    assert [(c.kind, c.symbol) for c in chunks] == [("function", "Observable.pipe")]


OBJECT = b"""const observableFactories: IObservableFactory = {
    box<T = any>(value: T, options?: CreateObservableOptions): IObservableValue<T> {
        const o = asCreateObservableOptions(options)
        return new ObservableValue(value, getEnhancerFromOptions(o), o.name, true, o.equals)
    },
    array: function <T = any>(initialValues?: T[], options?: CreateObservableOptions) {
        const o = asCreateObservableOptions(options)
        return createObservableArray(initialValues, getEnhancerFromOptions(o), o.name)
    },
    map: (initialValues?: IObservableMapInitialValues, options?: CreateObservableOptions) =>
        new ObservableMap(initialValues, getEnhancerFromOptions(options), options?.name),
    ref: observableRefAnnotation,
} as any

const settings = { name: "x", deep: true, compare: () => true }
"""


def test_an_object_of_functions_is_a_definition_with_its_functions_as_members(
    count_tokens: CountTokens, check: Checker
) -> None:
    """``const api = { box() {…}, array: function … , map: () => … } as any`` (MobX's
    ``observableFactories``) is a definition named ``observableFactories``; over the budget,
    each function is a member of it, named ``observableFactories.box``; an object with one
    function stays module code."""
    chunks = chunk("src/api/observable.ts", OBJECT, count_tokens=count_tokens)
    check(OBJECT, chunks, BUDGET)
    assert [(c.kind, c.symbol) for c in chunks] == [
        ("object", "observableFactories"),
        ("module", ""),
    ]
    small = ChunkingSettings(budget=300)
    chunks = chunk("src/api/observable.ts", OBJECT, small, count_tokens=count_tokens)
    check(OBJECT, chunks, 300)
    members = {c.symbol: c.kind for c in chunks if c.kind == "method"}
    assert members == {
        "observableFactories.box": "method",
        "observableFactories.array": "method",
        "observableFactories.map": "method",
    }


CAST = b"""const computedAnnotation = createComputedAnnotation(COMPUTED)

export const computed: IComputedFactory = function computed(arg1, arg2) {
    if (isPlainObject(arg1)) {
        return createComputedDecoratorAnnotation(createComputedAnnotation(COMPUTED, arg1))
    }
    const opts: IComputedValueOptions<any> = isPlainObject(arg2) ? arg2 : {}
    opts.get = arg1
    return new ComputedValue(opts)
} as any

export const tracked = (function track(fn) {
    return fn()
})
"""


def test_a_function_cast_or_in_parentheses_is_a_function(
    count_tokens: CountTokens, check: Checker
) -> None:
    """``export const computed: IComputedFactory = function computed(…) {…} as any`` (MobX's
    ``computed``, which was module code) and ``const tracked = (function track(fn) {…})``
    are functions named for their variables, as they are without the cast."""
    chunks = chunk("src/api/computed.ts", CAST, count_tokens=count_tokens)
    check(CAST, chunks, BUDGET)
    assert [(c.kind, c.symbol) for c in chunks if c.kind == "function"] == [
        ("function", "computed"),
        ("function", "tracked"),
    ]
    js = b"const tracked = (function track(fn) {\n    return fn()\n})\n"
    assert [(c.kind, c.symbol) for c in chunk("lib/track.js", js)] == [("function", "tracked")]
