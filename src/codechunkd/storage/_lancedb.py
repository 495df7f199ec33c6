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

On Python 3.11 LanceDB also decorates its connection and table classes with the
``overrides`` package, whose ``@override`` reads the bytecode of the calling frame to
find each class's bases and checks every signature: a third of what was left of the
import.  On 3.12 LanceDB uses ``typing.override`` instead, which only marks the method;
``import_lancedb`` gives LanceDB that same marker while it imports (the ``overrides``
module itself is left as it was, for anyone else).
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

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


_F = TypeVar("_F", bound=Callable[..., Any])


def _override(method: _F) -> _F:
    """``typing.override`` of Python 3.12: marks the method, checks nothing."""
    with contextlib.suppress(AttributeError, TypeError):  # as typing.override does
        method.__override__ = True  # type: ignore[attr-defined]
    return method


class _EnforceOverrides:
    """What LanceDB defines as ``EnforceOverrides`` on Python 3.12: nothing."""


@contextmanager
def _typing_overrides() -> Iterator[None]:
    """While LanceDB imports, ``overrides`` is a module of 3.12's two markers."""
    if sys.version_info >= (3, 12) or "lancedb" in sys.modules:
        yield
        return
    marker = types.ModuleType("overrides")
    marker.override = _override  # type: ignore[attr-defined]
    marker.EnforceOverrides = _EnforceOverrides  # type: ignore[attr-defined]
    saved = sys.modules.get("overrides")
    sys.modules["overrides"] = marker
    try:
        yield
    finally:
        if saved is None:
            del sys.modules["overrides"]
        else:
            sys.modules["overrides"] = saved


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
    with _typing_overrides():
        import lancedb

    return lancedb
