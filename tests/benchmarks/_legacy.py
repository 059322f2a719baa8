"""The store as released at 1d17249 (schema v2), loaded from git for same-run baselines.

The storage benchmarks compare today's ``SqliteSessionStore`` with the one it replaced,
on the same machine in the same run. The old module is read with ``git show`` (the
benchmarks run from a clone) and imported under a private name; it uses only helpers
that still exist with the same meaning (``stores.validation``, ``core.log``…).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

BASE_COMMIT = "1d17249"


def store_module_at(commit: str) -> ModuleType:
    """``stores/sqlite.py`` as it was at ``commit``, read with ``git show`` and imported
    under a private name (once per process). ``OSError`` or ``CalledProcessError`` when
    git or the commit is missing. (The fixture makers of older schemas use it too.)"""
    name = f"_dsh_sqlite_{commit}"
    module = sys.modules.get(name)
    if module is None:
        root = Path(__file__).resolve().parents[2]
        source = subprocess.run(
            ["git", "show", f"{commit}:stores/sqlite.py"],
            cwd=root,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        spec = importlib.util.spec_from_loader(name, loader=None)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        exec(compile(source, f"{commit}:stores/sqlite.py", "exec"), module.__dict__)
    return module


def legacy_store_class() -> Any | None:
    """``SqliteSessionStore`` of 1d17249, or ``None`` when git or the commit is missing."""
    if "stores.paths" not in sys.modules:
        # Gone since b83eb6a (one default_database_path in core.config); the old
        # module imports it from there.
        import core.config

        paths = ModuleType("stores.paths")
        paths.default_database_path = core.config.default_database_path  # type: ignore[attr-defined]
        sys.modules["stores.paths"] = paths
    try:
        module = store_module_at(BASE_COMMIT)
    except (OSError, subprocess.CalledProcessError):
        return None
    return module.SqliteSessionStore
