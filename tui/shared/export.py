"""Markdown export of a session's whole conversation (reference cards included): what a
compaction took off the surface stays in, marked (``tui.shared.history``), and times are
local, as the app shows them.

Untrusted text is escaped with ``core.display`` (one-line fields with ``single_line``,
bodies with ``escape_control``): the export is read with ``cat`` and in editors, so no
control, bidi or format character is written raw. (The lossless form is the JSON log.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from core.cards import card_summary, card_title
from core.display import escape_control, single_line
from core.log import Event, SessionHeader, message_text
from tui.shared.fences import code_fence
from tui.shared.items import classify_surface
from tui.shared.times import local_minute as _stamp
from tui.shared.times import local_zone

__all__ = ["export_markdown"]


def _quote(text: str) -> list[str]:
    return ["> " + line if line else ">" for line in text.split("\n")]


def export_markdown(
    header: SessionHeader,
    title: str | None,
    events: Sequence[Event],
    taken: Mapping[int, str] | None = None,
) -> list[str]:
    """``events``: the surface events to show, in order (``whole_history``); ``taken``: those
    no longer on the surface, seq → why (``"compacted"``), marked in their headings."""
    taken = taken or {}

    def mark(event: Event) -> str:
        return f" · {taken[event.seq]}" if event.seq in taken else ""

    lines = [f"# {single_line(title or header.id)}", ""]
    lines.append(f"- session: `{single_line(header.id)}`")
    lines.append(
        f"- cwd: `{single_line(header.cwd)}`" if header.cwd is not None else "- cwd: (none)"
    )
    lines.append(f"- created: {_stamp(header.created_at)} (times are local, {local_zone()})")
    for how in sorted(set(taken.values())):
        count = sum(1 for why in taken.values() if why == how)
        instead = "the summary after them" if how == "compacted" else "what replaced them"
        are = "s are" if count != 1 else " is"
        lines.append(f"- {count} earlier message{are} marked {how}: the model sees {instead}")
    for item in classify_surface(events):
        event = item.event
        lines.append("")
        if item.kind == "card" and item.card is not None:
            lines.append(f"### {single_line(card_title(item.card))}{mark(event)}")
            lines.append("")
            lines.append(f"_{single_line(card_summary(item.card))}_")
            for source in item.card.sources:
                lines.append("")
                lines.append(
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
            lines += [f"## Assistant · {_stamp(event.time)}{mark(event)}", "", escape_control(text)]
            if event.data.get("finish") == "interrupted":
                lines += ["", "_(interrupted)_"]
            continue
        if item.kind == "user":
            lines += [
                f"## You · {_stamp(event.time)}{mark(event)}",
                "",
                *_quote(escape_control(message_text(event.data))),
            ]
            continue
        if item.kind == "checkpoint":
            body = escape_control(message_text(event.data))
            fence = code_fence(body)
            heading = f"## Compacted summary · {_stamp(event.time)}{mark(event)}"
            lines += [heading, "", fence, body, fence]
            continue
        if item.kind == "steering":
            message = event.data.get("message")
            text = message_text(message) if isinstance(message, Mapping) else ""
            lines += [
                f"## You (steering) · {_stamp(event.time)}{mark(event)}",
                "",
                *_quote(escape_control(text)),
            ]
            continue
        lines.append(f"_({single_line(event.type)} event #{event.seq} not shown)_")
    return lines
