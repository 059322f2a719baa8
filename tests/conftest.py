"""Suite-wide options."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--snapshot-update",
        action="store_true",
        default=False,
        help="write the UI snapshot baselines in snapshots/ instead of comparing (look at them first!)",
    )
