"""The deferred REST-client package loses nothing: its attributes still resolve."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap


def test_deferred_rest_client_still_resolves_everything() -> None:
    """The REST client whose import is deferred still resolves every name on first use."""
    code = textwrap.dedent(
        """
        import sys
        from codechunkd.storage._lancedb import import_lancedb
        lancedb = import_lancedb()
        client = sys.modules["lance_namespace_urllib3_client"]
        deferred = "ApiClient" not in vars(client)
        from lance_namespace_urllib3_client import ApiClient, Configuration
        from lance_namespace_urllib3_client.models import CreateTableRequest
        print(deferred, ApiClient.__name__, Configuration.__name__, CreateTableRequest.__name__)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "ApiClient", "Configuration", "CreateTableRequest"]


def test_lancedb_imports_with_3_12_override_markers_and_leaves_overrides_alone() -> None:
    """LanceDB's methods carry the ``@override`` mark, and a later ``import overrides``
    gets the real package, whose ``@override`` still checks."""
    code = textwrap.dedent(
        """
        import sys
        from codechunkd.storage._lancedb import import_lancedb
        lancedb = import_lancedb()
        from lancedb.db import LanceDBConnection
        marked = LanceDBConnection.open_table.__override__
        absent = "overrides" not in sys.modules
        from overrides import override
        class Base:
            pass
        try:
            class Child(Base):
                @override
                def nowhere(self):
                    pass
            checks = False
        except TypeError:
            checks = True
        db = lancedb.connect(sys.argv[1])
        db.create_table("t", data=[{"x": 1}])
        print(marked, absent, checks, db.open_table("t").count_rows())
        """
    )
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [sys.executable, "-c", code, tmp], capture_output=True, text=True, check=True
        )
    assert out.stdout.split() == ["True", "True", "True", "1"]
