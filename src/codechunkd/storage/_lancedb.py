"""Import LanceDB without paying for its REST-namespace client up front.

``import lancedb`` imports ``lance_namespace``, whose package ``__init__``
imports ``lance_namespace_urllib3_client``: an OpenAPI-generated REST client
whose own ``__init__`` builds every pydantic model and API class.  That alone
was half of LanceDB's import (docs/operations.md, Measured), paid by every
command that opens an index, although codechunkd never talks to a REST
namespace (local directories and object stores go through LanceDB's Rust core).

``import_lancedb`` registers that package as a lazy package first: its
submodules (the models ``lance_namespace`` needs) import normally from disk,
and the package's own ``__init__`` runs the first time anything else asks for
one of its attributes (e.g. ``ApiClient``), so nothing is lost, only deferred.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from typing import Any

_REST_CLIENT = "lance_namespace_urllib3_client"


class _DeferredPackage(types.ModuleType):
    """A package whose ``__init__`` runs on first access to a missing attribute."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or self.__dict__.get("_codechunkd_loaded"):
            raise AttributeError(name)
        self.__dict__["_codechunkd_loaded"] = True
        spec = self.__spec__
        assert spec is not None and spec.loader is not None
        code = spec.loader.get_code(self.__name__)  # type: ignore[attr-defined]
        exec(code, self.__dict__)  # noqa: S102 - the installed package's own __init__
        try:
            return self.__dict__[name]
        except KeyError:
            raise AttributeError(name) from None


def import_lancedb() -> Any:
    if "lancedb" not in sys.modules and _REST_CLIENT not in sys.modules:
        spec = importlib.util.find_spec(_REST_CLIENT)
        if spec is not None and spec.submodule_search_locations is not None:
            package = _DeferredPackage(_REST_CLIENT)
            package.__spec__ = spec
            package.__loader__ = spec.loader
            package.__file__ = spec.origin
            package.__path__ = list(spec.submodule_search_locations)
            package.__package__ = _REST_CLIENT
            sys.modules[_REST_CLIENT] = package
    import lancedb

    return lancedb
