"""The canonical test vectors, copied from ``shared/vectors`` into ``tests/vectors``.

The suite must pass in a lone clone, so the copy lives in the repository. A missing file is
a hard failure, never a skip: these files are the contract.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core.jsoncodec import loads_exact

VECTORS_DIR = Path(__file__).resolve().parents[1] / "vectors"


def load_vectors(name: str) -> Any:
    """Parse ``tests/vectors/<name>`` as JavaScript does (an escaped surrogate pair is its
    character, SPEC §4.1; a lone surrogate stays)."""
    path = VECTORS_DIR / name
    if not path.is_file():
        pytest.fail(f"test vectors not found at {path}", pytrace=False)
    return loads_exact(path.read_text(encoding="utf-8"), frozen=False)
