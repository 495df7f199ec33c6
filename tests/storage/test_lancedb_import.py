"""The deferred REST-client package loses nothing: its attributes still resolve."""

from __future__ import annotations

import subprocess
import sys
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
