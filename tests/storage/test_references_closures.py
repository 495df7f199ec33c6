"""Bare JavaScript and TypeScript names on a real index: a closure's call of a function of
a scope around it is that function (``exact``), and a bare name is never guessed to be a
class's member or a function nested in another definition (the language has no implicit
``this``).  Before, ``reset()`` in ``share``'s inner arrow function was a guess among every
``reset`` of the source, and each bare ``data`` (a parameter) a guess that it meant the
getter ``MessageEvent.data``, which ranked that file near the top of the map of the npm CLI.

Real git repositories, a real LanceDB index and the real model (through ``Indexer``).
"""

from __future__ import annotations

from tests.conftest import Indexer, Repo
from tests.storage.test_references import index_of

from codechunkd.config import Settings

EVENTS = """class MessageEvent {
  get data () {
    return this.payload
  }
}

module.exports = { MessageEvent }
"""
HANDLE = """function handle (data, cb) {
  return cb(data)
}

module.exports = { handle }
"""
_STEPS = "".join(f"        count += {n} * step(count, {n})\n" for n in range(40))
#: Long enough that its inner functions are chunks of their own (definitions: ``share.reset``),
#: as in RxJS's ``share``; a small function is one chunk, its inner functions locals of it.
SHARE = f"""export function share(step: (a: number, b: number) => number): () => number {{
    let count = 0
    const reset = () => {{
{_STEPS}        return count
    }}
    const again = () => {{
{_STEPS}        reset()
        return count
    }}
    return again
}}
"""
OTHER = "export function reset(): number {\n    return 0\n}\n"


def test_a_closure_calls_its_scopes_function_and_a_bare_name_is_no_member(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``reset()`` in ``share``'s inner function is ``share.reset``, ``exact`` (not also
    ``other.ts``'s ``reset``), and the parameter ``data`` passed on in ``handle.js`` means
    nothing of the source (it was the getter ``MessageEvent.data``, by name)."""
    files = {
        "events.js": EVENTS,
        "handle.js": HANDLE,
        "src/share.ts": SHARE,
        "src/other.ts": OTHER,
    }
    index = index_of(repo, indexer, settings, files)
    resets = {(u.path, u.how, u.target.symbol) for u in index.references("reset") if u.target}
    assert resets == {("src/share.ts", "exact", "share.reset")}, resets
    assert not [u for u in index.references("MessageEvent.data") if u.path == "handle.js"]
    graph = index.refs.graph()
    meant = {}
    for i in graph.uses_by_name.get("data", ()):
        if graph._path[i] == "handle.js" and not graph._qual[i]:
            meant[graph._line[i]] = graph.resolve(i)
    assert list(meant) == [2], meant  # ``cb(data)``: a parameter passed on
    assert meant[2] == ([], ""), meant  # not the getter ``MessageEvent.data``, by name
