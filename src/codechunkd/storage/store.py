"""The LanceDB index: chunk rows, the file manifest, and per-source state.

One writer per index directory (concurrent ``merge_insert`` on overlapping ids
was measured to leave duplicate ids).  Each batch of changed files is one
commit of ``chunks`` (its old rows replaced by its new rows: readers never see a
file half-updated), then one commit of ``files``, then the source's state.
The order makes every crash repairable: a path whose ``files`` row is missing
or stale is simply done again, and re-doing a file is idempotent.

Every handle uses strong read consistency: a default LanceDB handle never sees
another process's later writes.

Storage owns LanceDB: every method that touches a table translates LanceDB, Arrow
and OS errors (``@translating``, see ``storage/_errors.py``) into one-line
``StoreError``s, and a missing or unreadable file into ``IndexDamaged``
(``codechunkd index --rebuild`` repairs it, see ``storage/repair.py``).  Callers
never see a LanceDB exception.

Its parts, each a module of its own: the tables (``storage/tables.py``), the reads
(``storage/reads.py``), the writer's writes (``storage/writes.py``), the upkeep of indexes
and folds (``storage/upkeep.py``), and Ray's data files (``storage/fragments.py``); the
rows they write are built by ``storage/rows.py``.  ``IndexStore`` joins them: it is the
one handle the rest of codechunkd holds.  This module holds no method of its own and
must not grow any: a new one goes where its concern lives.
"""

from __future__ import annotations

from codechunkd.storage.fragments import Fragments
from codechunkd.storage.reads import Reads
from codechunkd.storage.statefile import SourceState as SourceState  # re-exported
from codechunkd.storage.statefile import read_state_file as read_state_file  # re-exported
from codechunkd.storage.upkeep import Upkeep
from codechunkd.storage.writes import Writes


class IndexStore(Writes, Reads, Upkeep, Fragments):
    """The tables of one index directory: reads, the writer's writes, upkeep, Ray's commits."""
