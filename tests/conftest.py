"""Suite-wide options."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.pgcluster import Cluster, find_binaries, running_cluster


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--snapshot-update",
        action="store_true",
        default=False,
        help="write the UI snapshot baselines in snapshots/ instead of comparing (look at them first!)",
    )


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    """One throwaway PostgreSQL cluster for the whole session, started on first use.

    Skips (saying why) when the PostgreSQL binaries are missing, except under ``CI=true``,
    where that is a failure: CI must run these tests, never pass by skipping them.
    """
    bindir = find_binaries()
    if bindir is None:
        reason = (
            "PostgreSQL binaries (initdb, pg_ctl, postgres) not found on PATH or in "
            "/usr/lib/postgresql/*/bin: install Debian's postgresql package"
        )
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason + " (CI=true: these tests must run)")
        pytest.skip(reason)
    with running_cluster(bindir) as cluster:
        yield cluster
