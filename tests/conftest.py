"""Suite-wide options."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pgbouncer import Bouncer, pgbouncer_or_skip, running_pgbouncer
from tests.pgcluster import (
    ALICE,
    BOB,
    SECRET_ROLE,
    SUPERUSER,
    Cluster,
    binaries_or_skip,
    running_cluster,
)

_HOME_KEY = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    """No test writes into the developer's own state, data or config folders (drafts, UI
    state, the default database): the whole run, child processes included, gets its own.
    Tests that need a folder of their own still set it (e.g. ``tests/ui/conftest.py``).

    Bytecode is cached even where ``PYTHONDONTWRITEBYTECODE`` is set (this machine's and
    CI's environment set it): without the cache every worker rewrites the asserts of every
    test module again (about 9 s of CPU each) and every ``dsh`` the tests start compiles
    dsh from source (0.1 to 0.2 s each, several hundred times a run)."""
    sys.dont_write_bytecode = False
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    home = Path(tempfile.mkdtemp(prefix="dsh-tests-"))
    config.stash[_HOME_KEY] = home
    for name in ("XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"):
        os.environ[name] = str(home / name.lower())


def pytest_unconfigure(config: pytest.Config) -> None:
    """The run's own state, data and config folders go with it."""
    home = config.stash.get(_HOME_KEY, None)
    if home is not None:
        shutil.rmtree(home, ignore_errors=True)


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
    with running_cluster(binaries_or_skip()) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def pg_bouncer(pg_cluster: Cluster) -> Iterator[Bouncer]:
    """PgBouncer in transaction pooling mode in front of ``pg_cluster``, for the whole
    session (its superuser, ``alice`` and ``bob``). Skips without the binary, except under
    ``CI=true``, where that is a failure."""
    pgbouncer_or_skip()
    with running_pgbouncer(pg_cluster, [SUPERUSER, ALICE, BOB, SECRET_ROLE]) as bouncer:
        yield bouncer
