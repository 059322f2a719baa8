"""The context meter in the status line (issue 32): the next request's tokens (marked as
an estimate unless the provider counted them), the share of the profile's context window
(marked when assumed), the cost so far on a priced profile; what a draft's mentions add
before sending (measured once typing stops); a warning when the next request would not
fit the window. The figures are ``core.usage``'s."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from core.log import ASSISTANT_MESSAGE, USER_MESSAGE, NewEvent, assistant_message, user_message
from core.references import SessionReferenceService
from core.usage import measure, measure_draft
from stores import SessionQuery, SqliteSessionStore
from tests.providers.fake_openai import FakeOpenAIServer, chunk_json, fake_openai
from tests.ui.conftest import FIXED_NOW, SIZE, make_app
from tests.ui.profile_harness import PROFILES, profile_runtime, replies
from tests.ui.test_app import mention, send_idle, settle, wait_for
from tui.app import meter as meter_module
from tui.app.app import DshApp
from tui.app.meter import measure_session
from tui.shared.meter import draft_words, meter_line
from tui.shared.runtime import Runtime

__all__ = ["fake_openai"]


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Requests to the fake server never go through a proxy from the environment."""
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    yield


async def measured(app: DshApp, pilot: Pilot[int], after: int | None = None) -> str:
    """The meter once the open session has been measured (again, after ``after``)."""
    done = app.meter.measures if after is None else after
    await wait_for(pilot, lambda: app.meter.measures > done or (after is None and done > 0))
    await wait_for(pilot, lambda: app.status.meter_text not in ("", "measuring…"))
    return app.status.meter_text


async def expected_line(app: DshApp, rt: Runtime, **draft: Any) -> str:
    """What the meter should say: ``core.usage.measure`` of the open session, in words."""
    chat = app.chat
    assert chat is not None and chat.profile is not None
    usage = await measure(chat, rt.config.profiles)
    return meter_line(usage, chat.profile.model, **draft).text


async def send(app: DshApp, pilot: Pilot[int], text: str) -> None:
    app.composer.focus()
    app.composer.set_draft(text)
    await pilot.press("enter")


# --------------------------------------------------------------------------- the session


async def test_the_meter_of_offline_replies_is_an_estimate(tmp_path: Path) -> None:
    async with profile_runtime(tmp_path) as rt:
        app = make_app(rt)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            first = await measured(app, pilot)
            # The seeded reply has no usage: the next request is estimated from the text.
            assert re.fullmatch(r"≈\d+ tokens next · <1% of 128k \(assumed\)", first), first
            assert first == await expected_line(app, rt)

            before = app.meter.measures
            await send(app, pilot, "How long is this conversation? " * 40)
            await send_idle(app, pilot)
            after = await measured(app, pilot, before)
            assert after != first
            assert after == await expected_line(app, rt)
            assert after.startswith("≈") and "of 128k (assumed)" in after and "$" not in after
            usage = app.meter.usage
            assert usage is not None and usage.replies == 1 and not usage.next_request_exact


async def test_the_meter_follows_the_profile(tmp_path: Path) -> None:
    async with profile_runtime(tmp_path) as rt:
        app = make_app(rt)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            await measured(app, pilot)
            before = app.meter.measures
            app.profiles.switch("beta")  # context_window = 64000: not assumed
            text = await measured(app, pilot, before)
            assert re.fullmatch(r"≈\d+ tokens next · <1% of 64k", text), text
            assert app.meter.usage is not None and app.meter.usage.profile == "beta"


async def test_no_session_no_meter(tmp_path: Path) -> None:
    async with profile_runtime(tmp_path, seeded=False) as rt:
        app = make_app(rt)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            assert app.chat is None
            assert app.status.meter_text == ""
            assert app.status.display is False or app.status.has_class("-no-meter")


PRICED = """
default_profile = "paid"

[profiles.paid]
provider = "openai"
base_url = "{base_url}"
model = "paid-model"
api_key_env = "DSH_TEST_PAID_KEY"
context_window = 10000
price_input = 2.0
price_output = 8.0
"""


async def test_a_priced_profile_shows_exact_tokens_and_the_cost(
    tmp_path: Path, fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DSH_TEST_PAID_KEY", "sk-test")
    usage = {"prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500}
    fake_openai.sse([chunk_json("Priced "), chunk_json("reply.", finish="stop", usage=usage)])
    body = PRICED.format(base_url=fake_openai.base_url)
    async with profile_runtime(tmp_path, body) as rt:
        app = make_app(rt)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            first = await measured(app, pilot)
            assert re.fullmatch(r"≈\d+ tokens next · (<1|\d+)% of 10k · \$0 so far", first), first
            before = app.meter.measures
            await send(app, pilot, "What does this cost?")
            await send_idle(app, pilot)
            reply = (await replies(rt, "checkout"))[-1]
            assert reply.data["usage"]["prompt_tokens"] == 1200
            assert reply.data["profile"] == "paid"
            text = await measured(app, pilot, before)
            # The provider's count (no ≈): 1,200 in + 300 out; 1200 × $2 + 300 × $8 per M.
            assert text == "1.5k tokens next · 15% of 10k · $0.005 so far"
            assert text == await expected_line(app, rt)
            assert app.meter.usage is not None and app.meter.usage.cost == pytest.approx(0.0048)


# --------------------------------------------------------------------------- the draft


class CountingQuery(SessionQuery):
    """The real query, counting the reads of each referenced session (``prepare`` reads a
    source's message tail first, its whole surface only when that is not enough)."""

    def __init__(self, store: Any) -> None:
        super().__init__(store)
        self.source_reads: list[str] = []

    async def read_message_tail(self, session_id: str, budget: int) -> Any:
        self.source_reads.append(session_id)
        return await super().read_message_tail(session_id, budget)

    async def read_surface(self, session_id: str) -> Any:
        if session_id != "checkout":  # the meter's own reading of the open session
            self.source_reads.append(session_id)
        return await super().read_surface(session_id)


def counting(rt: Runtime) -> tuple[Runtime, CountingQuery]:
    query = CountingQuery(rt.store)
    return (
        Runtime(rt.config, rt.store, query, SessionReferenceService(query), rt.provider),
        query,
    )


MENTIONS = (
    ("k8s-upgrade", "Kubernetes upgrade"),
    ("search-tuning", "Search relevance"),
    ("scratch", "scratch"),
)


async def test_the_draft_meter_shows_what_its_references_add(tmp_path: Path) -> None:
    async with profile_runtime(tmp_path) as base:
        rt, query = counting(base)
        app = make_app(rt)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            await measured(app, pilot)
            query.source_reads.clear()
            composer = app.composer
            composer.focus()
            composer.insert("Compare ")
            for session_id, label in MENTIONS:  # typed quickly: measured once, at the end
                composer.insert(mention(session_id, label) + " ")
                await pilot.pause(0.05)
            await wait_for(pilot, lambda: app.status.meter_text.startswith("3 references"))
            # The debounce: each source was read once, by the last measure only.
            assert sorted(query.source_reads) == sorted(sid for sid, _ in MENTIONS)
            assert app.chat is not None
            draft = await measure_draft(app.chat, composer.draft)
            text = app.status.meter_text
            assert text == draft_words(draft) + " · <1% of 128k (assumed)"
            assert re.fullmatch(
                r"3 references · \d+(\.\d)? KB · ≈\d+ tokens · <1% of 128k \(assumed\)", text
            ), text
            assert text == await expected_line(app, rt, draft=draft, draft_tokens=draft.tokens)

            # Sending takes the references; the meter goes back to the session's figures.
            before = app.meter.measures
            await pilot.press("enter")
            await send_idle(app, pilot)
            after = await measured(app, pilot, before)
            assert "references" not in after
            assert after == await expected_line(app, rt)


async def test_a_mention_that_cannot_be_prepared_shows_why_briefly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(meter_module, "ERROR_SECONDS", 0.5)
    async with profile_runtime(tmp_path) as rt:
        app = make_app(rt)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            session = await measured(app, pilot)
            app.composer.focus()
            app.composer.insert("Look at " + mention("checkout", "this very session"))
            await wait_for(pilot, lambda: app.status.meter_text.startswith("References:"))
            assert (
                app.status.meter_text == "References: a message cannot reference its own session."
            )
            assert app.status.query_one("#meter").has_class("-error")
            assert "Traceback" not in app.export_screenshot()
            await wait_for(pilot, lambda: app.status.meter_text == session, limit=5)
            assert not app.status.query_one("#meter").has_class("-error")
            assert app.composer.draft.startswith("Look at ")  # the draft is the user's


async def test_a_deleted_source_is_said_in_the_meter(tmp_path: Path) -> None:
    async with profile_runtime(tmp_path) as rt:
        app = make_app(rt)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            await measured(app, pilot)
            await rt.store.delete_session("scratch")
            app.composer.focus()
            app.composer.insert(mention("scratch", "[b]gone[/b]\x1b[2J"))
            await wait_for(pilot, lambda: app.status.meter_text.startswith("References:"))
            text = app.status.meter_text
            assert "does not exist" in text and "[b]gone[/b]" in text and "\x1b" not in text


# --------------------------------------------------------------------------- the window


async def test_over_the_context_window_the_meter_warns_and_sending_still_works(
    tmp_path: Path,
) -> None:
    async with profile_runtime(tmp_path) as rt:
        app = make_app(rt)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            await measured(app, pilot)
            assert not app.status.meter_warning
            before = app.meter.measures
            app.profiles.switch("tiny")  # context_window = 50
            text = await measured(app, pilot, before)
            usage = app.meter.usage
            assert usage is not None and usage.context_window == 50
            over = usage.next_request_tokens - 50
            assert over > 0
            assert text.startswith(f"over the context window of tiny-1 (50) by ≈{over} tokens")
            assert app.status.meter_warning
            assert text == await expected_line(app, rt)

            # A draft's references are counted before sending.
            app.composer.focus()
            app.composer.insert("See " + mention("k8s-upgrade", "Kubernetes upgrade"))
            await wait_for(pilot, lambda: "1 reference · " in app.status.meter_text)
            assert app.meter.draft is not None
            more = over + app.meter.draft_tokens
            assert app.status.meter_text.startswith(
                f"over the context window of tiny-1 (50) by ≈{more} tokens · 1 reference · "
            )
            # The provider decides: the message is sent all the same.
            sent = len(await replies(rt, "checkout"))
            await pilot.press("enter")
            await send_idle(app, pilot)
            assert len(await replies(rt, "checkout")) == sent + 1


async def test_a_draft_can_push_the_request_over_the_window(tmp_path: Path) -> None:
    """A window the session fits in, and a draft whose reference does not."""
    (tmp_path / "probe").mkdir()
    async with profile_runtime(tmp_path / "probe") as probe:
        app = make_app(probe)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            await measured(app, pilot)
            assert app.meter.usage is not None
            fits = app.meter.usage.next_request_tokens + 30
    body = PROFILES.replace('default_profile = "alpha"', 'default_profile = "snug"') + (
        f'\n[profiles.snug]\nprovider = "offline"\nmodel = "snug-1"\ncontext_window = {fits}\n'
    )
    (tmp_path / "snug").mkdir()
    async with profile_runtime(tmp_path / "snug", body) as rt:
        app = make_app(rt)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            text = await measured(app, pilot)
            assert not app.status.meter_warning and "of " in text
            app.composer.focus()
            app.composer.insert("See " + mention("k8s-upgrade", "Kubernetes upgrade"))
            await wait_for(pilot, lambda: app.status.meter_warning)
            assert app.status.meter_text.startswith("over the context window of snug-1 (")
            app.composer.clear_draft()
            await wait_for(pilot, lambda: not app.status.meter_warning)


# --------------------------------------------------------------------------- the reading


def exchanges(count: int, at: int) -> Sequence[NewEvent]:
    events: list[NewEvent] = []
    for turn in range(1, count + 1):
        events.append(NewEvent(USER_MESSAGE, user_message(f"question {turn}"), "append", time=at))
        events.append(
            NewEvent(
                ASSISTANT_MESSAGE,
                {
                    "turn": turn,
                    "step": 0,
                    "message": assistant_message(f"answer {turn}", provider="offline", model="x"),
                    "usage": {"prompt_chars": 400 * turn, "completion_chars": 40},
                    "profile": "alpha",
                },
                "append",
                time=at,
            )
        )
    return events


async def test_the_sums_continue_from_the_last_reading(tmp_path: Path) -> None:
    """After a reply only the new events are read, and the figures are ``measure``'s."""
    async with profile_runtime(tmp_path, seeded=False) as rt:
        store = rt.store
        assert isinstance(store, SqliteSessionStore)
        await store.create_session("s", created_at=FIXED_NOW)
        await store.append_batch("s", exchanges(30, FIXED_NOW))
        chat = await rt.chat("s")
        first, tally = await measure_session(chat, rt.config.profiles)
        assert first == await measure(chat, rt.config.profiles)
        await store.append_batch("s", exchanges(3, FIXED_NOW + 1))
        second, tally2 = await measure_session(chat, rt.config.profiles, tally)
        assert second == await measure(chat, rt.config.profiles)
        assert second.replies == 33 and tally2.through == 65
        # Another profile prices differently: its sums start over.
        beta = rt.chat_for(chat.header, rt.config.profile("beta"))
        third, tally3 = await measure_session(beta, rt.config.profiles, tally2)
        assert third == await measure(beta, rt.config.profiles)
        assert tally3.profile == "beta"
