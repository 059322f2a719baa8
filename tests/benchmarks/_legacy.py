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
_NAME = "_dsh_legacy_sqlite_1d17249"


def legacy_store_class() -> Any | None:
    """``SqliteSessionStore`` of 1d17249, or ``None`` when git or the commit is missing."""
    module = sys.modules.get(_NAME)
    if module is None:
        root = Path(__file__).resolve().parents[2]
        try:
            source = subprocess.run(
                ["git", "show", f"{BASE_COMMIT}:stores/sqlite.py"],
                cwd=root,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        except (OSError, subprocess.CalledProcessError):
            return None
        if "stores.paths" not in sys.modules:
            # Gone since b83eb6a (one default_database_path in core.config); the old
            # module imports it from there.
            import core.config

            paths = ModuleType("stores.paths")
            paths.default_database_path = core.config.default_database_path  # type: ignore[attr-defined]
            sys.modules["stores.paths"] = paths
        spec = importlib.util.spec_from_loader(_NAME, loader=None)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[_NAME] = module
        exec(compile(source, f"{BASE_COMMIT}:stores/sqlite.py", "exec"), module.__dict__)
    assert isinstance(module, ModuleType)
    return module.SqliteSessionStore
