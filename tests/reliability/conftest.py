"""Knobs for the reliability suite (fuzz size, load size) and shared fixtures.

``DSH_FUZZ_EXAMPLES`` scales every hypothesis property here (default 60 per property, CI);
the long run is ``DSH_FUZZ_EXAMPLES=20000 pytest tests/reliability -k fuzz``.
``DSH_LOAD_MESSAGES`` sizes each source of the prepare-under-append test (default 20,000;
the issue's figure is ``DSH_LOAD_MESSAGES=200000``).
"""

from __future__ import annotations

import os

from tests.providers.fake_openai import fake_openai

__all__ = ["FUZZ_EXAMPLES", "LOAD_MESSAGES", "fake_openai"]


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw else default


FUZZ_EXAMPLES = _env_int("DSH_FUZZ_EXAMPLES", 60)
LOAD_MESSAGES = _env_int("DSH_LOAD_MESSAGES", 20_000)
