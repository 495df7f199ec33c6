"""A Python method called on a receiver of no known class, on a real index: the guess by
name is narrowed to the classes the receiver is named for (``executor.start()``: a
``…Executor``'s ``start``), not the ``start`` of the class the call is written in.

Real git repositories, a real LanceDB index and the real model (through ``Indexer``).
"""

from __future__ import annotations

from tests.conftest import Indexer, Repo
from tests.storage.test_references import index_of

from codechunkd.config import Settings
from codechunkd.storage.reader import Index

SCHEDULER = """class BaseScheduler:
    def start(self):
        for executor in self._executors.values():
            executor.start(self)
        jobstore_instance = self._lookup_jobstore("default")
        jobstore_instance.start(self)
        self._proto.start(self)
        super(BaseScheduler, self).start()
        self.manager.__enter__()
        self.Executor.start(self)

    def __enter__(self):
        return self


class BaseExecutor:
    def start(self, scheduler):
        return scheduler


class ThreadPoolExecutor(BaseExecutor):
    def start(self, scheduler):
        return scheduler


class MemoryJobStore:
    def start(self, scheduler):
        return scheduler


class StreamProtocol:
    def start(self, scheduler):
        return scheduler


class ResourceManager:
    def __enter__(self):
        return self
"""


def _meant(index: Index, path: str, name: str) -> dict[int, list[str]]:
    """What each by-name use of ``name`` in ``path`` is taken to mean when uses are listed
    (the guess narrowed by the use's form), by line."""
    graph = index.refs.graph()
    out = {}
    for i in graph.uses_by_name.get(name, ()):
        rows, how = graph.resolve(i)
        if graph._path[i] == path and how == "by-name":
            out[graph._line[i]] = sorted(graph._sym[j] for j in graph._by_form(i, rows))
    return out


def test_a_receiver_named_for_a_kind_of_class_means_those_classes_members(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``executor.start()`` is an ``…Executor``'s ``start``, ``jobstore_instance.start()`` a
    ``…JobStore``'s (a word of the name), ``self._proto.start()`` a ``…Protocol``'s (the
    start of a word): each was ``BaseScheduler.start``, the class the call is in, so
    ``refs BaseScheduler.start`` listed them all. No kind for a receiver that is no name
    (``super(…)``), a class (``self.Executor``) or a special method (``__enter__``), which
    every kind of object has."""
    index = index_of(repo, indexer, settings, {"scheduler.py": SCHEDULER})
    meant = _meant(index, "scheduler.py", "start")
    assert meant[4] == ["BaseExecutor.start", "ThreadPoolExecutor.start"], meant
    assert meant[6] == ["MemoryJobStore.start"], meant
    assert meant[7] == ["StreamProtocol.start"], meant
    assert meant[8] == ["BaseScheduler.start"], meant  # super(): as before
    assert len(meant[10]) == 5, meant  # a class's attribute: any class's ``start``
    assert _meant(index, "scheduler.py", "__enter__")[9] == [  # as before: any class's
        "BaseScheduler.__enter__",
        "ResourceManager.__enter__",
    ]
    assert [u.line for u in index.references("BaseScheduler.start")] == [8]
    assert [u.line for u in index.references("MemoryJobStore.start")] == [6]
    assert [u.line for u in index.references("StreamProtocol.start")] == [7]


def test_a_guess_among_a_method_and_its_overrides_is_a_use_of_the_method(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``executor.start()`` means ``BaseExecutor.start`` or the ``start`` of a subclass that
    overrides it (two or more levels down too): a use of the base's method, which ``refs``
    of the base lists (it listed none: the guess had several meanings), but not of one
    subclass's, which the call may not reach."""
    index = index_of(repo, indexer, settings, {"scheduler.py": SCHEDULER, "more.py": MORE})
    uses = [(u.path, u.line, u.how) for u in index.references("BaseExecutor.start")]
    assert ("scheduler.py", 4, "by-name") in uses, uses
    assert ("more.py", 11, "by-name") in uses, uses
    assert not [u for u in index.references("ThreadPoolExecutor.start") if u.line == 4]
    assert not [u for u in index.references("MemoryJobStore.start") if u.path == "more.py"]


MORE = """from scheduler import ThreadPoolExecutor


class ProcessPoolExecutor(ThreadPoolExecutor):
    def start(self, scheduler):
        return scheduler


def run(pool_executor):
    # ``…Executor``s: ThreadPoolExecutor, ProcessPoolExecutor and BaseExecutor's start
    pool_executor.start(None)
"""
