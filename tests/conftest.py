"""Suite-wide options."""

from __future__ import annotations

import gc
import hashlib
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


_MEMORY_TEMP = Path("/dev/shm")
_MEMORY_TEMP_ROOM = 4 << 30
"""Free space ``/dev/shm`` must have for the run's temp files to go there (a run writes
about 1.2 GiB at its peak)."""


def _temp_files_in_memory() -> None:
    """Every temp file of the run (``tmp_path``, the databases, the children's) goes to
    ``/dev/shm`` when it has room and the developer has not chosen a ``TMPDIR``: there an
    ``fsync`` costs nothing, and the suite makes thousands (about a tenth of the store and
    CLI tests' time on this 2-core machine's disk). ``DSH_TEST_DISK_TEMP=1`` keeps them on
    disk. The suite's PostgreSQL cluster runs with ``fsync=off`` wherever it is; the
    full-disk tests mount a tmpfs of their own."""
    if "TMPDIR" in os.environ or os.environ.get("DSH_TEST_DISK_TEMP"):
        return
    try:
        room = os.statvfs(_MEMORY_TEMP)
    except OSError:
        return
    if room.f_bavail * room.f_frsize >= _MEMORY_TEMP_ROOM and os.access(_MEMORY_TEMP, os.W_OK):
        os.environ["TMPDIR"] = str(_MEMORY_TEMP)  # the workers and every child inherit it
        tempfile.tempdir = None  # read again


_GC_THRESHOLDS = (10_000, 20, 20)
"""The cyclic garbage collector's thresholds in the test processes (Python's: 700, 10, 10).
Textual makes millions of short-lived objects (every ``Strip`` it draws holds several
caches): with Python's thresholds the collector took about 40 % of a UI test worker's CPU
time (25 of 60 s), with these about 15 % (9 s). Reference counting frees what it always
did; only cycles wait a little longer."""


def pytest_collection_finish(session: pytest.Session) -> None:
    """What is alive once the tests are collected (modules, test items) lives to the end:
    the collector need not walk it again at every full collection."""
    gc.collect()
    gc.freeze()


def _interrupts_reach_children() -> None:
    """Tests stop the ``dsh`` they start with SIGINT, as Ctrl+C does. A run started in
    the background of a non-interactive shell (``cmd &``, ``nohup``) begins with SIGINT
    ignored, and every child would inherit that and never stop: this process takes
    Python's own handler back, which a child's ``exec`` turns into the default."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


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
    _temp_files_in_memory()
    _interrupts_reach_children()
    gc.set_threshold(*_GC_THRESHOLDS)
    home = Path(tempfile.mkdtemp(prefix="dsh-tests-"))
    config.stash[_HOME_KEY] = home
    for name in ("XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"):
        os.environ[name] = str(home / name.lower())


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """The test modules run in a mixed order, each module's tests together and in their
    own order: the modules with a test marked ``slow`` first, then the rest in an order
    fixed by their paths' hashes (every worker must collect the same order), not folder
    by folder. Folder by folder, the UI tests, which spend much of their time waiting for
    the app to be idle, all came last, and the two cores idled through the last minute and
    a half of a run (a quarter to a third of the time); mixed, their waits overlap other
    modules' work. It also shows that no module depends on running after another."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def key(path: str) -> tuple[bool, bytes]:
        slow = any(item.get_closest_marker("slow") for item in modules[path])
        return (not slow, hashlib.blake2b(path.encode(), digest_size=8).digest())

    items[:] = [item for path in sorted(modules, key=key) for item in modules[path]]


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


_IDLE_WINDOW = 0.005
"""How long a UI test's wait for idle watches the process at a time (Textual's own: 20 ms)."""
_UPDATES_PER_WAIT = 3
"""Screen updates one wait may run itself (a spinner keeps asking for more)."""


def _ui_pending(app: object) -> bool:
    """Whether the app under test still has work queued for its screen: a message in a
    widget's queue, a callback waiting for the next refresh, a layout, repaint or
    recompose the screen's update timer has not run yet."""
    try:
        screen = app.screen  # type: ignore[attr-defined]
    except Exception:
        return False
    if (
        screen._callbacks
        or screen._dirty_widgets
        or screen._layout_required
        or screen._repaint_required
        or screen._recompose_required
        or screen._scroll_required
    ):
        return True
    for node in (app, *screen.walk_children(with_self=True)):
        if node.message_queue_size or node._next_callbacks:
            return True
    return False


async def _wait_for_idle(min_sleep: float = _IDLE_WINDOW, max_sleep: float = 1.0) -> None:
    """Textual's ``wait_for_idle`` for the tests (the Pilot's ``press`` and ``pause`` wait
    with it): idle is the process using (almost) no CPU for a 5 ms window **and** nothing
    left queued for the screen. Textual's own watches 20 ms windows for CPU alone: slower
    (a third of the UI tests' time was spent in it), and it could call a screen idle with
    an after-refresh callback (a footer's recompose) still to run, which only its longer
    window, one screen update tick, hid."""
    import asyncio
    from time import monotonic, process_time

    from textual._context import active_app

    app = active_app.get(None)
    start = monotonic()
    updates = 0
    while True:
        cpu = process_time()
        await asyncio.sleep(_IDLE_WINDOW)
        busy = process_time() - cpu >= _IDLE_WINDOW / 20
        elapsed = monotonic() - start
        if elapsed >= max_sleep:
            return
        if busy or elapsed <= min_sleep:
            continue
        if app is None or not _ui_pending(app):
            return
        if updates < _UPDATES_PER_WAIT:
            updates += 1
            app.screen._on_timer_update()  # what the screen's update timer would do next
        else:
            return


def _quicker_idle_waits() -> None:
    import textual.app
    import textual.pilot

    textual.pilot.wait_for_idle = _wait_for_idle  # type: ignore[attr-defined]
    textual.app.wait_for_idle = _wait_for_idle  # type: ignore[attr-defined]


_quicker_idle_waits()


def _css_parsed_once() -> None:
    """Textual parses the CSS of every widget class again for every app, its cache being
    the app's stylesheet's own: about a third of a Pilot test's start-up. The suite starts
    some 2,000 apps, so the parsed rules are kept for the process, under the same key
    Textual uses plus the theme's variables the rules were parsed with. Rule sets are not
    changed once parsed (the stylesheet only reads them into its map)."""
    from textual.css.stylesheet import Stylesheet

    parse_rules = Stylesheet._parse_rules
    parsed: dict[tuple[object, ...], Any] = {}

    def _parse_rules(
        self: Stylesheet,
        css: str,
        read_from: Any,
        is_default_rules: bool = False,
        tie_breaker: int = 0,
        scope: str = "",
    ) -> Any:
        key = (
            css,
            read_from,
            is_default_rules,
            tie_breaker,
            scope,
            tuple(self._variables.items()),
        )
        rules = parsed.get(key)
        if rules is None:
            rules = parse_rules(self, css, read_from, is_default_rules, tie_breaker, scope)
            parsed[key] = rules
        return rules

    Stylesheet._parse_rules = _parse_rules  # type: ignore[method-assign]


_css_parsed_once()
