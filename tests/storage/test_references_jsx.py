"""React components rendered in JSX are used, on a real index: ``<Button onClick={go}>``
and ``<Tabs.Panel />`` call the component (``refs Button`` lists each place it is
rendered, the map ranks components by them); an HTML element (``<div>``) is nobody's.
Before, JSX recorded nothing: a component's only use was its import.

Real git repositories, a real LanceDB index and the real model (through ``Indexer``).
"""

from __future__ import annotations

from tests.conftest import Indexer, Repo
from tests.storage.test_references import index_of

from codechunkd.config import Settings

BUTTON = """export default function Button({ children, onClick }) {
  return <button onClick={onClick}>{children}</button>
}
"""
TABS = """export function Panel({ title }: { title: string }) {
  return <section>{title}</section>
}

export function div(): number {
  return 0
}
"""
PAGE = """import Button from './Button'
import * as Tabs from './tabs'

export function Page({ go }: { go: () => void }) {
  return (
    <div>
      <Tabs.Panel title="one" />
      <Button onClick={go}>Go</Button>
    </div>
  )
}
"""


def test_a_component_rendered_in_jsx_is_called(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``<Button>`` in a ``.tsx`` file calls the default export of ``Button.jsx`` and
    ``<Tabs.Panel />`` the ``Panel`` of ``tabs.tsx`` (a namespace import), both
    ``imported``; ``<div>`` is an HTML element, not ``tabs.tsx``'s function ``div``."""
    files = {"src/Button.jsx": BUTTON, "src/tabs.tsx": TABS, "src/Page.tsx": PAGE}
    index = index_of(repo, indexer, settings, files)
    for symbol, line in (("Button", 8), ("Panel", 7)):
        calls = {(u.path, u.line, u.how) for u in index.references(symbol) if u.kind == "call"}
        assert calls == {("src/Page.tsx", line, "imported")}, (symbol, calls)
    assert not [u for u in index.references("div") if u.path == "src/Page.tsx"]
