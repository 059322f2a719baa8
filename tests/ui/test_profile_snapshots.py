"""SVG snapshots of profiles and the context meter (issue 32): the open session's profile
in the header, and the meter with a draft's pending references. Drawn in the pinned
environment of ``tests/ui/snapshots.py`` (UTC, frozen clock, default theme, fixed size);
baselines in ``snapshots/``, written with ``--snapshot-update`` after looking at them."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot

from core.log import SESSION_PROFILE
from stores import SqliteSessionStore
from tests.ui.conftest import SIZE, make_app
from tests.ui.profile_harness import profile_runtime
from tests.ui.snapshots import assert_snapshot, pinned_environment
from tests.ui.test_app import mention, settle, wait_for
from tui.app.app import DshApp

__all__ = ["pinned_environment"]  # autouse: every test here is drawn in it


async def on_beta(store: SqliteSessionStore) -> None:
    await store.append(
        "checkout", SESSION_PROFILE, {"profile": "beta", "provider": "offline", "model": "beta-1"}
    )


async def measured(app: DshApp, pilot: Pilot[int]) -> None:
    await wait_for(pilot, lambda: app.meter.measures > 0)
    await wait_for(pilot, lambda: app.status.meter_text not in ("", "measuring…"))
    await settle(app, pilot)


async def test_the_profile_in_the_header(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    async with profile_runtime(tmp_path, before=on_beta) as rt:
        app = make_app(rt)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            await measured(app, pilot)
            assert app.status.meter_text.endswith("of 64k")
            assert_snapshot(request, app, "app_profile_in_header")


async def test_the_meter_with_pending_references(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with profile_runtime(tmp_path) as rt:
        app = make_app(rt)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            await measured(app, pilot)
            composer = app.composer
            composer.focus()
            composer.insert(
                "Compare "
                + mention("k8s-upgrade", "Kubernetes upgrade")
                + " with "
                + mention("search-tuning", "Search relevance")
            )
            await wait_for(pilot, lambda: app.status.meter_text.startswith("2 references · "))
            await settle(app, pilot)
            assert_snapshot(request, app, "app_meter_pending_references")
