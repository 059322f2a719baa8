"""Several windows, one database: what another connection writes shows up in the TUI — new,
renamed and deleted sessions in the sidebar, new events of the open session in its
transcript — and a session busy elsewhere refuses a send with the draft kept.

Each test runs on SQLite (``PRAGMA data_version``) and on PostgreSQL (LISTEN/NOTIFY)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from core.log import (
    ASSISTANT_MESSAGE,
    USER_MESSAGE,
    Replace,
    assistant_message,
    user_message,
)
from stores import SessionStore, open_store
from tests.pgcluster import Cluster
from tests.pilot_wait import wait_for
from tests.storekinds import DURABLE_KINDS, durable_location
from tests.stores.test_postgres import terminate_dsh_connections
from tests.ui.conftest import FIXED_NOW, SIZE, make_app, title
from tests.ui.snapshots import screen_text
from tests.ui.test_app import settle
from tui.app.app import DshApp
from tui.app.follow import appended_tail
from tui.shared.runtime import Runtime

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=[*DURABLE_KINDS, "pgbouncer"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with durable_location(request, tmp_path) as where:
        yield where


@pytest.fixture
async def store(location: str) -> AsyncIterator[SessionStore]:
    """The app's database, of each durable kind (overrides the UI's SQLite-only one)."""
    opened = await open_store(location)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def elsewhere(runtime: Runtime, location: str) -> AsyncIterator[SessionStore]:
    """A second connection to the app's database: another window or process."""
    opened = await open_store(location)
    try:
        yield opened
    finally:
        await opened.close()


def shown(app: DshApp, text: str) -> bool:
    return text in screen_text(app)


async def test_sidebar_follows_sessions_created_renamed_and_deleted_elsewhere(
    runtime: Runtime, elsewhere: SessionStore
) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.current_id == "checkout"
        app.sidebar.option_list.focus()
        await pilot.press("down", "down")  # the user is looking at the third row
        assert app.sidebar.visible_ids[2] == "search-tuning"

        await elsewhere.create_session("from-elsewhere", cwd="/x", created_at=FIXED_NOW)
        await wait_for(pilot, lambda: "from-elsewhere" in app.sidebar.visible_ids)
        # The open session and the row the user highlighted stay as they were.
        assert app.current_id == "checkout"
        highlighted = app.sidebar.option_list.highlighted
        assert highlighted is not None
        assert app.sidebar.visible_ids[highlighted] == "search-tuning"

        await elsewhere.append_batch("from-elsewhere", [title("Named in another window", 1)])
        await wait_for(
            pilot,
            lambda: (
                (e := app.sidebar.entry("from-elsewhere")) is not None
                and e.title == "Named in another window"
            ),
        )

        await elsewhere.delete_session("k8s-upgrade")
        await wait_for(pilot, lambda: "k8s-upgrade" not in app.sidebar.visible_ids)
        assert app.current_id == "checkout"


async def test_sidebar_follows_with_a_filter_kept(
    runtime: Runtime, elsewhere: SessionStore
) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.sidebar.option_list.focus()
        await pilot.press(*"/home/dev/shop")
        assert app.sidebar.visible_ids == ["checkout", "search-tuning"]
        await elsewhere.create_session("shop-notes", cwd="/home/dev/shop", created_at=FIXED_NOW)
        await elsewhere.create_session("infra-notes", cwd="/home/dev/infra", created_at=FIXED_NOW)
        # Both known (a refresh may come between the two creations), one shown.
        await wait_for(
            pilot,
            lambda: {e.header.id for e in app.sidebar.entries} >= {"shop-notes", "infra-notes"},
        )
        await wait_for(pilot, lambda: "shop-notes" in app.sidebar.visible_ids)
        assert app.sidebar.filter_input.value == "/home/dev/shop"
        assert "infra-notes" not in app.sidebar.visible_ids


async def test_transcript_follows_events_appended_elsewhere(
    runtime: Runtime, elsewhere: SessionStore
) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.current_id == "checkout"
        before = len(app.transcript.item_widgets)

        await elsewhere.append(
            "checkout",
            USER_MESSAGE,
            user_message("A question asked in another window"),
            surface_op="append",
        )
        await wait_for(pilot, lambda: shown(app, "A question asked in another window"))
        await elsewhere.append(
            "checkout",
            ASSISTANT_MESSAGE,
            {
                "turn": 2,
                "step": 0,
                "message": assistant_message(
                    "The answer written by that window", provider="p", model="m"
                ),
                "finish": "completed",
            },
            surface_op="append",
        )
        await wait_for(pilot, lambda: shown(app, "The answer written by that window"))
        await settle(app, pilot)
        assert len(app.transcript.item_widgets) == before + 2

        # Now this window sends: its reply is shown once, after the other window's answer.
        app.composer.set_draft("and one from here")
        await pilot.press("enter")
        await wait_for(
            pilot, lambda: not app.streaming and len(app.transcript.item_widgets) >= before + 4
        )
        await elsewhere.append(
            "checkout",
            USER_MESSAGE,
            user_message("a last word from elsewhere"),
            surface_op="append",
        )
        await wait_for(pilot, lambda: shown(app, "a last word from elsewhere"))
        await settle(app, pilot)
        assert len(app.transcript.item_widgets) == before + 5
        snapshot = await runtime.query.read_surface("checkout")
        assert app.transcript.known_seqs == {e.seq for e in snapshot.events}


async def test_transcript_reloads_after_a_compaction_elsewhere(
    runtime: Runtime, elsewhere: SessionStore
) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        surface = (await elsewhere.read_surface_events("checkout"))[2]
        seqs = [e.seq for e in surface]
        await elsewhere.append(
            "checkout",
            USER_MESSAGE,
            user_message(
                "<compacted-summary>\nA summary from elsewhere\n</compacted-summary>",
                source={"kind": "plugin", "plugin": "compact"},
            ),
            surface_op=Replace(seqs[0], seqs[-1]),
            source_event_seqs=seqs,
        )
        await wait_for(pilot, lambda: len(app.transcript.item_widgets) == 1)
        await settle(app, pilot)
        assert not shown(app, "merge shipping and billing")


async def test_open_session_deleted_elsewhere_opens_another_and_keeps_the_draft(
    runtime: Runtime, elsewhere: SessionStore
) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.composer.set_draft("half a thought")
        await elsewhere.delete_session("checkout")
        await wait_for(pilot, lambda: app.current_id == "k8s-upgrade")
        assert "deleted in another window" in app.notice.visible_text
        assert "checkout" not in app.sidebar.visible_ids
        assert app.composer.draft == "half a thought"


async def test_send_on_a_session_busy_elsewhere_keeps_the_draft(
    runtime: Runtime, elsewhere: SessionStore
) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        before = await runtime.store.read_events("checkout")
        assert await elsewhere.take_reply_lease("checkout", "another process", ttl_ms=60_000)
        app.composer.set_draft("please answer")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "busy" in app.notice.visible_text)
        assert "another window or process" in app.notice.visible_text
        # "another process" is not a process known to run on this machine: it may be gone.
        assert "If none is, `dsh unlock checkout` frees it." in app.notice.visible_text
        assert app.composer.draft == "please answer"
        assert await runtime.store.read_events("checkout") == before


async def test_send_on_a_session_a_process_here_writes_gives_no_unlock_hint(
    runtime: Runtime, elsewhere: SessionStore
) -> None:
    from core.leases import lease_owner

    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert await elsewhere.take_reply_lease("checkout", lease_owner(), ttl_ms=60_000)
        app.composer.set_draft("please answer")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "busy" in app.notice.visible_text)
        assert "dsh unlock" not in app.notice.visible_text
        assert app.composer.draft == "please answer"


def test_appended_tail_tells_appends_from_other_changes() -> None:
    from core.log import Event, SessionHeader
    from core.query import SurfaceWindow

    def window(seqs: tuple[int, ...], read: int) -> SurfaceWindow:
        events = tuple(
            Event(seq=s, type=USER_MESSAGE, time=0, data=user_message("x"), surface_op="append")
            for s in seqs[len(seqs) - read :]
        )
        return SurfaceWindow(SessionHeader("s", 0), seqs[-1], seqs, events)

    known = frozenset({0, 1, 2})
    assert appended_tail(window((0, 1, 2), 2), known) == ()
    assert [e.seq for e in appended_tail(window((0, 1, 2, 4, 5), 3), known) or ()] == [4, 5]
    assert appended_tail(window((0, 1, 2, 4, 5), 1), known) is None  # more than was read
    assert appended_tail(window((6, 2), 2), known) is None  # a replace shadowed 0 and 1


async def test_a_message_added_elsewhere_just_before_a_send_shows_in_log_order(
    runtime: Runtime, elsewhere: SessionStore
) -> None:
    """The report: another process appended a message, then this window sent; the model's
    answer (to both) showed under this window's message, the other one never shown."""
    app = make_app(runtime)
    async with app.run_test(size=(100, 60)) as pilot:
        await settle(app, pilot)
        await elsewhere.append(
            "checkout", USER_MESSAGE, user_message("EXTERNAL question"), surface_op="append"
        )
        app.composer.set_draft("LOCAL question")
        await pilot.press("enter")
        await wait_for(pilot, lambda: shown(app, "EXTERNAL question") and not app.streaming)
        await wait_for(pilot, lambda: len(app.transcript.known_seqs) == 5)
        await settle(app, pilot)
        text = screen_text(app)
        assert text.index("EXTERNAL question") < text.index("LOCAL question")
        surface = (await runtime.query.read_surface("checkout")).events
        assert [e.type for e in surface[-3:]] == [USER_MESSAGE, USER_MESSAGE, ASSISTANT_MESSAGE]
        assert app.transcript.known_seqs == {e.seq for e in surface}
        assert len(app.transcript.item_widgets) == len(surface)


@pytest.mark.parametrize("location", ["postgres"], indirect=True)
async def test_a_dropped_server_connection_reconnects_and_says_so(
    runtime: Runtime, elsewhere: SessionStore, pg_cluster: Cluster
) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await terminate_dsh_connections(pg_cluster)
        await wait_for(pilot, lambda: shown(app, "Reconnected to"))
        assert "connection was lost" in screen_text(app)
        assert "-warning" not in app.notice.classes
        # Following goes on over the new connection.
        await elsewhere.append(
            "checkout", USER_MESSAGE, user_message("after the reconnect"), surface_op="append"
        )
        await wait_for(pilot, lambda: shown(app, "after the reconnect"))


def test_appended_tail_of_a_window_of_the_newest_rows_only() -> None:
    """A window read from the newest rows (``complete`` false: no replace among them)."""
    from core.log import Event, SessionHeader
    from core.query import SurfaceWindow

    def window(seqs: tuple[int, ...], read: int) -> SurfaceWindow:
        events = tuple(
            Event(seq=s, type=USER_MESSAGE, time=0, data=user_message("x"), surface_op="append")
            for s in seqs[len(seqs) - read :]
        )
        return SurfaceWindow(SessionHeader("s", 0), seqs[-1], seqs, events, complete=False)

    known = frozenset(range(10))  # every seq of the surface, earlier pages read
    assert appended_tail(window((7, 8, 9), 3), known) == ()
    assert [e.seq for e in appended_tail(window((8, 9, 11), 3), known) or ()] == [11]
    assert appended_tail(window((11, 12, 13), 3), known) is None  # no overlap: reload
    assert appended_tail(window((7, 9, 11), 3), known) is None  # 8 is gone: reload
    assert appended_tail(window((8, 9, 11, 12), 1), known) is None  # more than was read


@pytest.mark.parametrize("location", ["pgbouncer"], indirect=True)
async def test_behind_a_pooler_a_dropped_server_connection_changes_nothing_the_user_sees(
    runtime: Runtime, elsewhere: SessionStore, pg_cluster: Cluster
) -> None:
    """PgBouncer opens a new server connection for the next transaction: the app polls on
    (it cannot LISTEN there) and says nothing, neither a warning nor a reconnection."""
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert getattr(runtime.store, "pooled", False)
        await terminate_dsh_connections(pg_cluster)
        await elsewhere.append(
            "checkout",
            USER_MESSAGE,
            user_message("after the pooler reconnected"),
            surface_op="append",
        )
        await wait_for(pilot, lambda: shown(app, "after the pooler reconnected"))
        assert "connection" not in screen_text(app)
        assert "-warning" not in app.notice.classes
