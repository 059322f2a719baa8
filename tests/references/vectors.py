"""Locate the shared test vectors (``../shared/vectors`` next to the repository).

A missing vectors folder is a hard failure, never a skip: these files are the contract.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core.jsoncodec import loads_exact

REPO_ROOT = Path(__file__).resolve().parents[2]
VECTORS_DIR = (REPO_ROOT / ".." / "shared" / "vectors").resolve()


def load_vectors(name: str) -> Any:
    """Parse ``shared/vectors/<name>`` exactly (escaped surrogate pairs stay two chars)."""
    path = VECTORS_DIR / name
    if not path.is_file():
        pytest.fail(f"shared test vectors not found at {path}", pytrace=False)
    return loads_exact(path.read_text(encoding="utf-8"), frozen=False)
