"""Markdown export of a session's whole conversation (reference cards included): what a
compaction took off the surface stays in, marked (``tui.shared.history``), and times are
local, as the app shows them.

Untrusted text is escaped with ``core.display`` (one-line fields with ``single_line``,
bodies with ``escape_control``): the export is read with ``cat`` and in editors, so no
control, bidi or format character is written raw. (The lossless form is the JSON log.)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

from core.cards import card_summary, card_title
from core.display import escape_control, single_line
from core.log import Event, SessionHeader, message_text
from tui.shared.fences import code_fence
from tui.shared.items import iter_classified
from tui.shared.logevents import log_event_line
from tui.shared.times import local_minute as _stamp
from tui.shared.times import local_zone

__all__ = ["export_markdown", "markdown_lines"]


def _quote(text: str) -> list[str]:
    return ["> " + line if line else ">" for line in text.split("\n")]


def export_markdown(
    header: SessionHeader,
    title: str | None,
    events: Sequence[Event],
    taken: Mapping[int, str] | None = None,
) -> list[str]:
    return list(markdown_lines(header, title, events, taken))


def markdown_lines(
    header: SessionHeader,
    title: str | None,
    events: Iterable[Event],
    taken: Mapping[int, str] | None = None,
) -> Iterator[str]:
    """The Markdown export a line at a time, reading ``events`` as it goes (``dsh export``
    of a session of any size writes it in the memory of one item). ``events``: the surface
    events to show, in order (``whole_history``); ``taken``: those no longer on the
    surface, seq → why (``"compacted"``), marked in their headings."""
    taken = taken or {}

    def mark(event: Event) -> str:
        return f" · {taken[event.seq]}" if event.seq in taken else ""

    yield from [f"# {single_line(title or header.id)}", ""]
    yield f"- session: `{single_line(header.id)}`"
    yield f"- cwd: `{single_line(header.cwd)}`" if header.cwd is not None else "- cwd: (none)"
    yield f"- created: {_stamp(header.created_at)} (times are local, {local_zone()})"
    for how in sorted(set(taken.values())):
        count = sum(1 for why in taken.values() if why == how)
        instead = "the summary after them" if how == "compacted" else "what replaced them"
        are = "s are" if count != 1 else " is"
        yield f"- {count} earlier message{are} marked {how}: the model sees {instead}"
    for item in iter_classified(events):
        event = item.event
        yield ""
        if item.kind == "card" and item.card is not None:
            yield f"### {single_line(card_title(item.card))}{mark(event)}"
            yield ""
            yield f"_{single_line(card_summary(item.card))}_"
            for source in item.card.sources:
                yield ""
                yield (
                    f"- **{single_line(source.label)}** (`{single_line(source.session_id)}`), "
                    f"captured through seq "
                    f"{source.captured_through_seq}: kept {source.retained_messages}/"
                    f"{source.original_messages}, omitted {source.omitted_messages} messages / "
                    f"{source.omitted_bytes} bytes"
                    + (", compacted" if source.compacted else "")
                    + (", truncated" if source.truncated else "")
                )
            continue
        if item.kind == "assistant":
            message = event.data.get("message")
            text = message_text(message) if isinstance(message, Mapping) else ""
            yield from [
                f"## Assistant · {_stamp(event.time)}{mark(event)}",
                "",
                escape_control(text),
            ]
            if event.data.get("finish") == "interrupted":
                yield from ["", "_(interrupted)_"]
            continue
        if item.kind == "user":
            yield from [
                f"## You · {_stamp(event.time)}{mark(event)}",
                "",
                *_quote(escape_control(message_text(event.data))),
            ]
            continue
        if item.kind == "checkpoint":
            body = escape_control(message_text(event.data))
            fence = code_fence(body)
            heading = f"## Compacted summary · {_stamp(event.time)}{mark(event)}"
            yield from [heading, "", fence, body, fence]
            continue
        if item.kind == "steering":
            message = event.data.get("message")
            text = message_text(message) if isinstance(message, Mapping) else ""
            yield from [
                f"## You (steering) · {_stamp(event.time)}{mark(event)}",
                "",
                *_quote(escape_control(text)),
            ]
            continue
        line = log_event_line(event)
        if line is not None:  # a profile switch, a fork's origin
            yield f"_{line} · {_stamp(event.time)}_"
            continue
        yield f"_({single_line(event.type)} event #{event.seq} not shown)_"
