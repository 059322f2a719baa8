"""A package whose names load on first use (issue 36): ``dsh --help`` and the one-shot
commands import only the modules they run, while ``from core import Event`` and
``stores.sqlite.surfaces`` keep working as they did with eager imports."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: a name of ``homes`` (name → the module
    it lives in) is loaded from its module when first asked for, then kept in the
    package; any other name is a submodule, imported as an eager import would have made
    it an attribute, else ``AttributeError``."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            try:
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as err:
                if err.name != f"{package}.{name}":
                    raise
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
