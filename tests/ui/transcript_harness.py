"""A tiny app that hosts one ``Transcript``, and real-store builders for its events."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.text import Text
from textual.app import App, ComposeResult
from textual.content import Content
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Static

from core.log import (
    ASSISTANT_MESSAGE,
    COMPACT_CHECKPOINT_SOURCE,
    STEERING_MESSAGE,
    TOOL_RESULT,
    USER_MESSAGE,
    Event,
    NewEvent,
    SessionHeader,
    assistant_message,
    reasoning_block,
    text_block,
    tool_result_block,
    user_message,
)
from core.references import SessionReferenceConfig, SessionReferenceInput, SessionReferenceService
from stores import MemorySessionStore, SessionQuery
from tests.ui.conftest import workers_done
from tui.app.transcript.transcript import FLUSH_INTERVAL, ReplyView, Transcript
from tui.shared.render import GrowingMarkdown, LiteralMarkdown

BASE_TIME = 1_700_000_000_000


def fixed_time(ms: int) -> str:
    """A timestamp format independent of the machine's time zone."""
    return f"t+{(ms - BASE_TIME) // 1000}s"


def plain(widget: Widget) -> str:
    """The text a Static shows (its renderable is Text or Content, never markup)."""
    assert isinstance(widget, Static)
    visual = widget.render()
    if isinstance(visual, (Text, Content)):
        return visual.plain
    visual = getattr(visual, "_renderable", visual)  # a Rich renderable wrapped by Textual
    if isinstance(visual, (LiteralMarkdown, GrowingMarkdown)):  # reply bodies: as on screen
        console = Console(width=200, file=io.StringIO(), color_system=None, legacy_windows=False)
        with console.capture() as capture:
            console.print(visual)
        return capture.get().rstrip("\n")
    return str(visual)


def shown_text(root: Widget) -> str:
    """Every Static's text under ``root`` (Markdown blocks included), in DOM order."""
    parts = []
    for widget in root.query(Static):
        if widget.display and all(a.display for a in widget.ancestors if isinstance(a, Widget)):
            parts.append(plain(widget))
    return "\n".join(parts)


async def settle(pilot: Pilot[None]) -> None:
    """Wait for mounts, the streaming flush timer and pending loads of the transcript."""
    app = pilot.app
    for _ in range(50):
        await pilot.pause(FLUSH_INTERVAL * 1.5)
        await workers_done(app)
        transcript = app.query_one(Transcript)
        if transcript.settled:
            break
    await pilot.pause()


class TranscriptApp(App[None]):
    """Mounts one transcript; ``events`` are loaded on mount."""

    def __init__(self, events: Sequence[Event] = (), **options: Any) -> None:
        super().__init__()
        self.initial_events = list(events)
        options.setdefault("time_format", fixed_time)
        self.transcript = Transcript(id="transcript", **options)
        self.finished_replies: list[ReplyView] = []

    def compose(self) -> ComposeResult:
        yield self.transcript

    async def on_mount(self) -> None:
        await self.transcript.load(self.initial_events)

    def on_reply_view_finished(self, message: ReplyView.Finished) -> None:
        self.finished_replies.append(message.view)


def user(text: str) -> NewEvent:
    return NewEvent(USER_MESSAGE, user_message(text), "append")


def assistant(text: str, **extra: Any) -> NewEvent:
    data: dict[str, Any] = {
        "turn": 1,
        "step": 0,
        "message": assistant_message(text, provider="offline", model="echo-1"),
        **extra,
    }
    return NewEvent(ASSISTANT_MESSAGE, data, "append")


@dataclass
class Stored:
    store: MemorySessionStore
    query: SessionQuery
    header: SessionHeader

    async def append(self, *events: NewEvent) -> list[Event]:
        return await self.store.append_batch(self.header.id, list(events))

    async def surface(self) -> list[Event]:
        return list((await self.query.read_surface(self.header.id)).events)


async def new_session(
    store: MemorySessionStore | None = None,
    *,
    session_id: str | None = None,
    cwd: str | None = None,
) -> Stored:
    store = store if store is not None else MemorySessionStore()
    header = await store.create_session(session_id, cwd=cwd, created_at=BASE_TIME)
    return Stored(store, SessionQuery(store), header)


async def send_with_references(
    target: Stored,
    text: str,
    references: Sequence[SessionReferenceInput],
    *,
    config: SessionReferenceConfig | None = None,
) -> list[Event]:
    """Deliver a message exactly as SPEC §5: the snapshot then the direct message, one batch."""
    service = SessionReferenceService(target.query, config)
    prepared = await service.prepare(target.header, [text_block(text)], references)
    batch: list[NewEvent] = []
    if prepared.additional_context is not None:
        batch.append(NewEvent(USER_MESSAGE, prepared.additional_context, "append"))
    batch.append(NewEvent(USER_MESSAGE, user_message(prepared.content), "append"))
    return await target.append(*batch)


async def every_kind_session() -> tuple[Stored, Stored]:
    """A target whose surface holds every kind of item, and the source it references."""
    source = await new_session(session_id="source-1", cwd="/home/ada/webshop")
    await source.append(
        user("How do we cache the product list?"),
        assistant("Use a **read-through** cache with a 60 s TTL."),
        user("And invalidation?"),
        assistant("Purge on every product write."),
    )
    target = await new_session(source.store, session_id="target-1", cwd="/home/ada/webshop")
    await target.append(
        NewEvent(
            USER_MESSAGE,
            user_message("Earlier we agreed on caching.", source=dict(COMPACT_CHECKPOINT_SOURCE)),
            "append",
        ),
        user("Plain question"),
        assistant("A *plain* answer with `code`."),
    )
    await send_with_references(
        target,
        "Compare with @Webshop caching please",
        [SessionReferenceInput("source-1", "Webshop caching")],
    )
    steering = user_message("Actually, keep it short")
    tool_message = user_message(
        [tool_result_block("call_7", [text_block("42 rows\nsecond line")])],
        source={"kind": "tool", "callId": "call_7"},
    )
    await target.append(
        NewEvent(
            ASSISTANT_MESSAGE,
            {
                "turn": 2,
                "step": 0,
                "message": assistant_message(
                    [reasoning_block("Let me think."), text_block("Partial answer")],
                    provider="offline",
                    model="echo-1",
                ),
                "finish": "interrupted",
                "interrupted": True,
            },
            "append",
        ),
        NewEvent(STEERING_MESSAGE, {"turn": 2, "message": steering}, "append"),
        NewEvent(TOOL_RESULT, {"turn": 2, "step": 1, "message": tool_message}, "append"),
        NewEvent(
            USER_MESSAGE,
            user_message("Project rules: be kind.", source={"kind": "plugin", "plugin": "rules"}),
            "append",
        ),
        assistant("", finish="error", error={"kind": "http", "message": "503 from provider"}),
    )
    return target, source
