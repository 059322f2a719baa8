# State changes across awaits are invisible to mypy's narrowing:
# mypy: disable-error-code="unreachable"
"""Pilot tests of the transcript widget and the reference cards (tui/transcript.py, tui/cards.py)."""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.content import Content
from textual.widget import Widget
from textual.widgets import Button, Static

from core.cards import parse_reference_card
from core.engine import ChatSession, ReplyDelta, ReplyFinished, Submitted
from core.log import (
    COMPACT_CHECKPOINT_SOURCE,
    USER_MESSAGE,
    Event,
    NewEvent,
    Replace,
    user_message,
)
from core.providers.offline import OfflineProvider
from core.references import (
    SessionReferenceConfig,
    SessionReferenceInput,
    SessionReferenceService,
    format_session_reference_mention,
)
from tests.ui.transcript_harness import (
    Stored,
    TranscriptApp,
    assistant,
    every_kind_session,
    new_session,
    plain,
    send_with_references,
    settle,
    shown_text,
    user,
)
from tui.app.transcript.cards import (
    HIDE_CONVERSATION,
    SHOW_CONVERSATION,
    CheckpointCard,
    CollapsedItem,
    Foldable,
    ReferenceCard,
    conversation_text,
)
from tui.app.transcript.transcript import (
    EMPTY_STATE_TEXT,
    PAGE_SIZE,
    AssistantMessage,
    ReplyView,
    UserMessage,
)
from tui.shared.render import LiteralMarkdown

SIZE = (100, 40)

# --------------------------------------------------------------------------- helpers


def kinds(widgets: Iterable[Widget]) -> list[str]:
    return [type(w).__name__ for w in widgets]


# --------------------------------------------------------------------------- replay


async def test_every_kind_replays() -> None:
    target, _ = await every_kind_session()
    app = TranscriptApp(await target.surface())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        transcript = app.transcript
        widgets = transcript.item_widgets
        assert kinds(widgets) == [
            "CheckpointCard",
            "UserMessage",
            "AssistantMessage",
            "ReferenceCard",
            "UserMessage",
            "AssistantMessage",
            "UserMessage",  # steering
            "CollapsedItem",  # tool result
            "CollapsedItem",  # plugin context
            "AssistantMessage",
        ]
        checkpoint, user_msg, answer, card, _request, partial, steering, tool, context, failed = (
            widgets
        )
        assert isinstance(checkpoint, CheckpointCard) and not checkpoint.expanded
        assert plain(checkpoint.query_one(".fold-header")).endswith("Compacted summary")
        assert checkpoint.body is None  # heavy bodies are mounted on first expand only
        assert plain(user_msg).startswith("You")
        assert "Plain question" in plain(user_msg)
        assert isinstance(answer, AssistantMessage)
        body = answer.query_one(".message-body-static", Static).render()
        assert isinstance(getattr(body, "_renderable", None), LiteralMarkdown)
        assert "A plain answer with code." in shown_text(answer)
        assert isinstance(card, ReferenceCard) and not card.expanded
        assert isinstance(steering, UserMessage)
        assert plain(steering).startswith("You (steering)")
        assert "Actually, keep it short" in plain(steering)
        assert isinstance(tool, CollapsedItem) and not tool.expanded
        header = plain(tool.query_one(".fold-header"))
        assert "Tool result call_7: 42 rows" in header and "\n" not in header
        assert isinstance(context, CollapsedItem)
        assert "Context from rules" in plain(context.query_one(".fold-header"))

        # Interrupted and error markers on assistant messages.
        assert "Partial answer" in shown_text(partial)
        assert "Interrupted" in plain(partial.query_one(".message-marker"))
        assert partial.query_one(".message-marker").has_class("-interrupted")
        marker = failed.query_one(".message-marker")
        assert "Error: 503 from provider" in plain(marker) and marker.has_class("-error")

        # Reasoning is kept out of the way: a collapsed fold inside the message.
        reasoning = partial.query_one(CollapsedItem)
        assert reasoning.has_class("reasoning") and not reasoning.expanded

        # Collapsed items expand to their text (tool result, context, checkpoint).
        tool.expanded = True
        context.expanded = True
        checkpoint.expanded = True
        await settle(pilot)
        assert "42 rows\nsecond line" in plain(tool.query_one(".fold-text"))
        assert "Project rules: be kind." in plain(context.query_one(".fold-text"))
        assert "Earlier we agreed on caching." in plain(checkpoint.query_one(".fold-text"))

        assert transcript.last_reply_text() == "Partial answer"
        assert not transcript.empty_state.display


async def test_mentions_in_the_request_are_highlighted() -> None:
    target, _ = await every_kind_session()
    app = TranscriptApp(await target.surface())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        request = app.transcript.item_widgets[4]
        assert isinstance(request, UserMessage)
        visual = request.render()
        assert isinstance(visual, (Text, Content))
        start = visual.plain.index("@Webshop caching")
        end = start + len("@Webshop caching")
        spans = visual.spans
        assert any(s.start <= start and s.end >= end for s in spans)


async def test_unknown_surface_kinds_are_a_generic_collapsed_item() -> None:
    odd = Event(0, "plugin/widget", 1_700_000_000_000, {"shape": "[bold]x[/]"}, "append")
    app = TranscriptApp([odd])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        (item,) = app.transcript.item_widgets
        assert isinstance(item, CollapsedItem)
        assert "plugin/widget event" in plain(item.query_one(".fold-header"))
        await pilot.click(item, offset=(3, 0))
        await settle(pilot)
        assert item.expanded
        assert '"shape": "[bold]x[/]"' in plain(item.query_one(".fold-text"))


# --------------------------------------------------------------------------- cards


async def _card_session() -> tuple[Stored, Stored, Stored]:
    """A target referencing a truncated source and a compacted source (tiny byte budget)."""
    big = await new_session(session_id="big-source", cwd="/srv/big")
    await big.append(*[user(f"question {i} " + "x" * 200) for i in range(6)])
    compacted = await new_session(big.store, session_id="compacted-source")
    await compacted.append(
        NewEvent(
            USER_MESSAGE,
            user_message("summary of earlier work", source=dict(COMPACT_CHECKPOINT_SOURCE)),
            "append",
        ),
        user("follow-up after compaction"),
    )
    target = await new_session(big.store, session_id="the-target")
    await send_with_references(
        target,
        "Look at @Big and @Small",
        [SessionReferenceInput("big-source", "Big"), SessionReferenceInput("compacted-source")],
        config=SessionReferenceConfig(max_reference_bytes=900),
    )
    return target, big, compacted


async def test_card_is_collapsed_with_title_and_summary() -> None:
    target, _, _ = await _card_session()
    events = await target.surface()
    expected = parse_reference_card(events[0].data)
    assert expected is not None and expected.sources[0].truncated
    app = TranscriptApp(events)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        card = app.transcript.query_one(ReferenceCard)
        assert not card.expanded and card.body is None
        assert plain(card.query_one(".fold-header")) == (
            "▸ Referenced sessions · Big, compacted-source"
        )
        kept = sum(s.retained_messages for s in expected.sources)
        original = sum(s.original_messages for s in expected.sources)
        assert plain(card.query_one(".fold-summary")) == (
            f"{kept}/{original} messages kept · truncated · compacted"
        )


async def test_expanding_a_card_shows_every_stat_keyboard_and_mouse() -> None:
    target, _, _ = await _card_session()
    events = await target.surface()
    expected = parse_reference_card(events[0].data)
    assert expected is not None
    app = TranscriptApp(events)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        card = app.transcript.query_one(ReferenceCard)
        card.focus()
        await pilot.press("enter")
        await settle(pilot)
        assert card.expanded and card.body is not None
        details = [plain(w) for w in card.query(".card-source")]
        assert len(details) == 2
        for source, text in zip(expected.sources, details, strict=True):
            assert source.label in text
            assert f"id: {source.session_id}" in text
            assert f"cwd: {source.cwd}" in text if source.cwd else "cwd: no cwd" in text
            assert f"captured through: seq {source.captured_through_seq}" in text
            assert (
                f"messages: {source.retained_messages} kept of {source.original_messages}"
                f" · {source.omitted_messages} omitted"
            ) in text
            assert f"omitted bytes: {source.omitted_bytes}" in text
            assert f"compacted: {'yes' if source.compacted else 'no'}" in text
            assert f"truncated: {'yes' if source.truncated else 'no'}" in text
        big, small = expected.sources
        assert big.truncated and big.omitted_messages > 0 and big.omitted_bytes > 0
        assert small.compacted and small.cwd is None
        assert plain(card.query_one(".fold-header")).startswith("▾ ")

        # Space collapses (the body stays mounted, just hidden), a click expands again.
        await pilot.press("space")
        await settle(pilot)
        assert not card.expanded and card.body is not None and not card.body.display
        await pilot.click(card, offset=(4, 0))
        await settle(pilot)
        assert card.expanded and card.body.display


async def test_conversation_toggle_shows_exactly_what_the_model_received() -> None:
    target, _, _ = await _card_session()
    events = await target.surface()
    expected = parse_reference_card(events[0].data)
    assert expected is not None
    app = TranscriptApp(events)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        card = app.transcript.query_one(ReferenceCard)
        card.expanded = True
        await settle(pilot)
        assert card.conversation_widget is None  # mounted on first show only
        button = card.query_one(".card-conversation-toggle", Button)
        assert str(button.label) == SHOW_CONVERSATION
        await pilot.click(button)
        await settle(pilot)
        shown = [plain(w) for w in card.query(".card-conversation")]
        for source, text in zip(expected.sources, shown, strict=True):
            assert text == "\n".join(f"{role}: {body}" for role, body in source.conversation)
            assert text == conversation_text(source).plain
        assert shown[0].count("user: ") == expected.sources[0].retained_messages
        assert str(button.label) == HIDE_CONVERSATION

        # The key toggles it too.
        card.focus()
        await pilot.press("v")
        await settle(pilot)
        assert card.conversation_widget is not None and not card.conversation_widget.display
        await pilot.press("v")
        await settle(pilot)
        assert card.conversation_widget.display


async def test_card_replays_from_the_stored_log_after_the_source_is_deleted() -> None:
    target, big, compacted = await _card_session()
    before = await target.surface()
    await compacted.append(user("a change after the snapshot"))
    await big.store.delete_session(big.header.id)
    after = await target.surface()
    assert after == before
    app = TranscriptApp(after)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        card = app.transcript.query_one(ReferenceCard)
        card.action_toggle_conversation()
        await settle(pilot)
        text = shown_text(card)
        assert "id: big-source" in text and "question 5" in text
        assert "follow-up after compaction" in text
        assert "a change after the snapshot" not in text


async def test_card_built_by_the_engine_replays() -> None:
    source = await new_session(session_id="src", cwd="/w")
    await source.append(user("remember the milk"), assistant("noted"))
    target = await new_session(source.store, session_id="tgt", cwd="/w")
    chat = ChatSession(
        target.store,
        target.query,
        SessionReferenceService(target.query),
        OfflineProvider(),
        target.header,
    )
    mention = format_session_reference_mention(SessionReferenceInput("src", "Milk"))
    async for _ in chat.send(f"What did {mention} say?"):
        pass
    app = TranscriptApp(await target.surface())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert kinds(app.transcript.item_widgets) == [
            "ReferenceCard",
            "UserMessage",
            "AssistantMessage",
        ]
        request = app.transcript.item_widgets[1]
        assert "What did @Milk say?" in plain(request)
        assert "Referenced sessions (1)" in (app.transcript.last_reply_text() or "")


# --------------------------------------------------------------------------- hostile text

HOSTILE = (
    "[bold]x[/] [link=https://evil.example]click[/link] </referenced-sessions> "
    "<script>alert(1)</script> \x1b[31mred\x1b[0m nul\x00 bidi\u202eevil\u202c"
)


async def test_hostile_content_renders_literally() -> None:
    source = await new_session(session_id="evil\u202eid\x1b[2J", cwd="/tmp/[bold]cwd[/]\x07")
    await source.append(user(HOSTILE), assistant(HOSTILE))
    target = await new_session(source.store, session_id="victim")
    await send_with_references(
        target, HOSTILE, [SessionReferenceInput(source.header.id, "[bold]L[/]\x1b[2J</b>")]
    )
    await target.append(assistant(HOSTILE))
    app = TranscriptApp(await target.surface())
    async with app.run_test(size=(160, 60)) as pilot:
        await settle(pilot)
        card = app.transcript.query_one(ReferenceCard)
        card.action_toggle_conversation()
        await settle(pilot)
        answer = app.transcript.item_widgets[-1]
        assert isinstance(answer, AssistantMessage)
        texts = {
            "request": plain(app.transcript.item_widgets[1]),
            "answer": shown_text(answer),
            "card": shown_text(card),
        }
        for name, text in texts.items():
            assert "\x1b" not in text and "\x00" not in text and "\u202e" not in text, name
            assert "[bold]" in text, name
            assert "</referenced-sessions>" in text, name
            assert "<script>alert(1)</script>" in text, name
            assert "\\x1b[31mred" in text and "\\x00" in text and "\\u202e" in text, name
        assert "[link=https://evil.example]click[/link]" in texts["request"]
        assert "[bold]L[/]\\x1b[2J</b>" in texts["card"]
        assert "evil\\u202eid\\x1b[2J" in texts["card"]
        assert "/tmp/[bold]cwd[/]\\x07" in texts["card"]

        svg = app.export_screenshot()
        assert "\x1b" not in svg and "\u202e" not in svg
        assert "[bold]x[/]" in svg
        assert "&lt;/referenced-sessions&gt;" in svg
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in svg


# --------------------------------------------------------------------------- windowing


async def _long_session(count: int) -> list[Event]:
    session = await new_session()
    batch = []
    for i in range(count // 2):
        batch.append(user(f"question {i}"))
        batch.append(assistant(f"answer {i}\n\nwith a second **paragraph**"))
    await session.append(*batch)
    return await session.surface()


async def test_a_long_session_mounts_one_page_and_loads_earlier_in_place() -> None:
    events = await _long_session(5000)
    app = TranscriptApp(events)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        transcript = app.transcript
        assert transcript.item_count == 5000
        assert transcript.mounted_count == PAGE_SIZE
        assert len(transcript.query(UserMessage)) + len(transcript.query(AssistantMessage)) == (
            PAGE_SIZE
        )
        button = transcript.load_earlier_button
        assert button.display
        assert str(button.label) == f"Load earlier messages ({5000 - PAGE_SIZE:,} more)"
        assert transcript.scroll_y == transcript.max_scroll_y  # opens at the newest message
        # History bodies are one Static each, rendering Rich Markdown (no widget tree).
        bodies = [w.query_one(".message-body-static") for w in transcript.query(AssistantMessage)]
        assert bodies and all(isinstance(b, Static) for b in bodies)

        transcript.scroll_home(animate=False, immediate=True)
        await settle(pilot)
        first = transcript.item_widgets[0]
        y_before = first.region.y
        assert f"question {(5000 - PAGE_SIZE) // 2}" in plain(first)
        await pilot.click(button)
        await settle(pilot)
        assert transcript.mounted_count == 2 * PAGE_SIZE
        assert transcript.hidden_count == 5000 - 2 * PAGE_SIZE
        assert transcript.item_widgets[PAGE_SIZE] is first
        assert first.region.y == y_before  # the view did not jump
        assert f"question {(5000 - 2 * PAGE_SIZE) // 2}" in plain(transcript.item_widgets[0])
        assert str(button.label) == f"Load earlier messages ({5000 - 2 * PAGE_SIZE:,} more)"


async def test_paging_to_the_start_hides_the_button() -> None:
    events = await _long_session(30)
    app = TranscriptApp(events, page_size=12)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        transcript = app.transcript
        for _ in range(3):
            await transcript.load_earlier()
        await settle(pilot)
        assert transcript.mounted_count == 30 and transcript.hidden_count == 0
        assert not transcript.load_earlier_button.display
        assert "question 0" in plain(transcript.item_widgets[0])


async def test_a_long_live_session_prunes_old_items_while_following() -> None:
    session = await new_session()
    app = TranscriptApp([], page_size=10, max_mounted=30)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        transcript = app.transcript
        for i in range(40):
            events = await session.append(user(f"q{i}"))
            await transcript.add_events(events)
        await settle(pilot)
        assert transcript.item_count == 40
        assert transcript.mounted_count <= 30
        assert transcript.hidden_count == 40 - transcript.mounted_count
        assert transcript.load_earlier_button.display
        assert "q39" in plain(transcript.item_widgets[-1])


# --------------------------------------------------------------------------- live updates


async def test_send_and_stream_a_reply_with_the_engine() -> None:
    session = await new_session()
    chat = ChatSession(
        session.store,
        session.query,
        SessionReferenceService(session.query),
        OfflineProvider(),
        session.header,
    )
    app = TranscriptApp([])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        transcript = app.transcript
        assert transcript.empty_state.display
        view: ReplyView | None = None
        streamed = ""
        async for update in chat.send("hello there"):
            if isinstance(update, Submitted):
                await transcript.add_events(update.events)
                view = transcript.begin_reply()
            elif isinstance(update, ReplyDelta):
                assert view is not None
                view.append(update.kind, update.text)
                streamed += update.text
            elif isinstance(update, ReplyFinished):
                assert view is not None
                await view.finish(update.status, None)
                assert update.message_event is not None
                await transcript.add_events([update.message_event])  # adopted, not duplicated
        await settle(pilot)
        assert view is not None and view.finished
        assert not transcript.empty_state.display
        assert kinds(transcript.item_widgets) == ["UserMessage", "ReplyView"]
        assert view.source == streamed
        assert "hello there" in shown_text(view)
        assert not view.query_one(".message-marker").display  # completed: no marker
        assert transcript.last_reply_text() == streamed

        # A later full reload shows the same conversation from the store.
        await transcript.load(await session.surface())
        await settle(pilot)
        assert kinds(transcript.item_widgets) == ["UserMessage", "AssistantMessage"]
        assert transcript.last_reply_text() == streamed


async def test_streaming_batches_text_and_shows_reasoning_and_markers() -> None:
    app = TranscriptApp([])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        transcript = app.transcript
        view = transcript.begin_reply()
        await pilot.pause()
        assert "thinking…" in plain(view.query_one(".reply-thinking"))
        view.append("reasoning", "Consider the ")
        view.append("reasoning", "options.")
        for word in ["# Title\n\n", "Some ", "**bold** ", "text ", "<b>tag</b>"]:
            view.append("text", word)
        assert view.source == ""  # nothing rendered synchronously: batched
        await settle(pilot)
        assert view.source == "# Title\n\nSome **bold** text <b>tag</b>"
        assert "Some bold text <b>tag</b>" in plain(view.body)
        assert not view.query_one(".reply-thinking").display
        fold = view.query_one(CollapsedItem)
        assert "Thinking…" in plain(fold.query_one(".fold-header"))
        fold.expanded = True
        await settle(pilot)
        assert plain(fold.query_one(".fold-text")) == "Consider the options."
        view.append("text", " and the end")
        await view.finish("interrupted")
        assert view.source.endswith("and the end")
        marker = view.query_one(".message-marker")
        assert marker.display and marker.has_class("-interrupted")
        assert "Interrupted" in plain(marker)
        assert "Reasoning" in plain(fold.query_one(".fold-header"))
        view.append("text", "ignored after finish")
        assert "ignored" not in view.text

        failed = transcript.begin_reply()
        await pilot.pause()
        await failed.finish("error", "401: bad key")
        marker = failed.query_one(".message-marker")
        assert marker.display and marker.has_class("-error")
        assert "Error: 401: bad key" in plain(marker)
        assert transcript.last_reply_text() == view.text  # the failed reply has no text


async def test_follow_the_tail_unless_the_user_scrolled_up() -> None:
    events = await _long_session(60)
    app = TranscriptApp(events)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        transcript = app.transcript
        assert transcript.following
        view = transcript.begin_reply()
        for i in range(30):
            view.append("text", f"line {i}\n\n")
        await settle(pilot)
        assert transcript.scroll_y == transcript.max_scroll_y  # followed the new content

        transcript.focus()
        await pilot.press("pageup")
        await settle(pilot)
        assert not transcript.following
        held = transcript.scroll_y
        assert held < transcript.max_scroll_y
        for i in range(30, 60):
            view.append("text", f"line {i}\n\n")
        await settle(pilot)
        assert transcript.scroll_y == held  # not yanked
        assert transcript.scroll_y < transcript.max_scroll_y

        await pilot.press("end")  # back to the bottom: following again
        await settle(pilot)
        assert transcript.following
        for i in range(60, 90):
            view.append("text", f"line {i}\n\n")
        await view.finish("completed")
        await settle(pilot)
        assert transcript.scroll_y == transcript.max_scroll_y
        assert "line 89" in view.source


async def test_empty_state_guides_a_newcomer() -> None:
    app = TranscriptApp([])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        transcript = app.transcript
        empty = transcript.empty_state
        assert empty.display
        text = plain(empty)
        assert EMPTY_STATE_TEXT in text
        for hint in ("Enter", "@", "read-only snapshot", "Ctrl+N", "Ctrl+P"):
            assert hint in EMPTY_STATE_TEXT
        assert transcript.last_reply_text() is None
        assert "Ctrl+N" in app.export_screenshot()

        session = await new_session()
        await transcript.add_events(await session.append(user("first!")))
        await settle(pilot)
        assert not empty.display
        await transcript.show_empty_state()
        await settle(pilot)
        assert empty.display and transcript.item_count == 0 and transcript.mounted_count == 0


async def test_add_events_skips_known_events_and_keeps_card_labels() -> None:
    source = await new_session(session_id="s")
    await source.append(user("hi"))
    target = await new_session(source.store, session_id="t")
    app = TranscriptApp([])
    async with app.run_test(size=SIZE) as pilot:
        transcript = app.transcript
        card_event, message_event = await send_with_references(
            target, "see @Lbl", [SessionReferenceInput("s", "Lbl")]
        )
        await transcript.add_events([card_event])
        await transcript.add_events([card_event, message_event])
        await settle(pilot)
        assert kinds(transcript.item_widgets) == ["ReferenceCard", "UserMessage"]
        request = transcript.item_widgets[1]
        visual = request.render()
        assert isinstance(visual, (Text, Content))
        start = visual.plain.index("@Lbl")
        assert any(s.start <= start < s.end for s in visual.spans)


async def test_last_reply_text_and_compaction_reload() -> None:
    session = await new_session()
    stored = await session.append(user("q"), assistant("first reply"), user("q2"))
    app = TranscriptApp(await session.surface())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        transcript = app.transcript
        assert transcript.last_reply_text() == "first reply"
        # Compaction replaces the surface; the app reloads the transcript.
        await session.store.append(
            session.header.id,
            USER_MESSAGE,
            user_message("the summary", source=dict(COMPACT_CHECKPOINT_SOURCE)),
            surface_op=Replace(stored[0].seq, stored[-1].seq),
            source_event_seqs=[e.seq for e in stored],
        )
        await transcript.load(await session.surface())
        await settle(pilot)
        assert kinds(transcript.item_widgets) == ["CheckpointCard"]
        assert transcript.last_reply_text() is None
        assert isinstance(transcript.item_widgets[0], Foldable)


async def test_a_finished_reply_bound_to_its_event_is_not_shown_twice() -> None:
    session = await new_session()
    app = TranscriptApp([])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        transcript = app.transcript
        await transcript.add_events(await session.append(user("q")))
        view = transcript.begin_reply()
        view.append("text", "the answer")
        (stored,) = await session.append(assistant("the answer"))
        await view.finish("completed", event=stored)
        await transcript.add_events([stored])
        await transcript.add_events(await session.append(user("next")))
        await settle(pilot)
        assert app.finished_replies == [view]
        assert kinds(transcript.item_widgets) == ["UserMessage", "ReplyView", "UserMessage"]
        assert transcript.item_count == 3
        assert transcript.last_reply_text() == "the answer"
