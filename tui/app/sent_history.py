"""The Up/Down history of a session: its own sent messages, rebuilt from its stored surface.

A sent draft is not stored as typed: the log keeps its readable text (each mention shown as
``@label``) and, in the reference card stored just before it, the sessions it referenced.
Recalling the readable text alone would send ``@label`` as plain words and silently drop the
references, so each ``@label`` of a referenced session is turned back into its mention
(which the composer then shows as a chip, looking exactly like the readable text). Plain
functions over events, no Textual, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.log import Event, message_text
from core.references import SessionReferenceInput, format_session_reference_mention
from tui.shared.items import classify_surface

__all__ = ["rebuild_draft", "sent_messages"]


def rebuild_draft(text: str, references: Sequence[tuple[str, str]]) -> str:
    """``text`` with each ``@label`` of ``references`` (``(session_id, label)``) made its
    mention again; longer labels first so that ``@Beta release`` is not cut at ``@Beta``."""
    if not references:
        return text
    mentions = {
        "@" + label: format_session_reference_mention(SessionReferenceInput(session_id, label))
        for session_id, label in sorted(references, key=lambda ref: -len(ref[1]))
        if label
    }
    out: list[str] = []
    position = 0
    while position < len(text):
        at = text.find("@", position)
        if at < 0:
            break
        for needle, mention in mentions.items():
            if text.startswith(needle, at):
                out.append(text[position:at])
                out.append(mention)
                position = at + len(needle)
                break
        else:
            out.append(text[position : at + 1])
            position = at + 1
    out.append(text[position:])
    return "".join(out)


def sent_messages(events: Sequence[Event]) -> list[str]:
    """The user's own messages among surface ``events``, oldest first, as drafts to recall."""
    out: list[str] = []
    references: list[tuple[str, str]] = []
    for item in classify_surface(events):
        if item.kind == "card" and item.card is not None:
            references = [(source.session_id, source.label) for source in item.card.sources]
            continue
        if item.kind == "user":
            text = message_text(item.event.data)
            if text.strip():
                out.append(rebuild_draft(text, references))
        references = []
    return out
