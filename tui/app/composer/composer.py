"""The message composer: a multi-line editor with sent-message history and the ``@`` picker.

Typing ``@`` at the start of a line or after whitespace opens a :class:`MentionPicker` of
sessions to reference; picking one inserts the mention ``@[label](dsh-session:…)`` as one
*chip* drawn ``@label`` (the URI hidden; chips are :mod:`tui.app.composer.chiparea`'s, their
spans :mod:`tui.app.composer.chips`'): the cursor never stops inside it, an edit takes it
whole, and :attr:`Composer.draft` (what is sent, saved and copied) has the full mention. A
pasted mention becomes a chip; one typed key by key stays styled text.

Messages (all bubble to the app):

* :class:`Composer.Submitted` – Enter with a non-blank draft while ``send_enabled``; carries
  the raw draft, mentions intact. The composer does not clear itself: after a successful
  send the app calls :meth:`Composer.clear_draft` and :meth:`Composer.add_to_history`.
* :class:`Composer.SendBlocked` – Enter while ``send_enabled`` is False (the app says why).
* ``TextArea.Changed`` / ``TextArea.SelectionChanged`` as usual.

Esc is consumed only while the picker is open; otherwise it bubbles to the app.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import ClassVar

from rich.cells import cell_len
from textual import events, work
from textual.binding import Binding, BindingType
from textual.document._document import Location
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import TextArea

import core.log
from core.references import (
    SessionDiscovery,
    SessionReferenceCandidate,
    SessionReferenceSpan,
    labels,
)
from tui.app.composer.chiparea import (
    MENTION_CHIP_HIGHLIGHT,
    MENTION_LABEL_HIGHLIGHT,
    MENTION_URI_HIGHLIGHT,
    ChipArea,
)
from tui.app.composer.history import HistoryStep, SentHistory
from tui.app.composer.mentions import mention_query, opens_picker, refuses_pick
from tui.app.composer.picker import MentionPicker

__all__ = [
    "MAX_LABEL_CHARS",
    "MENTION_CHIP_HIGHLIGHT",
    "MENTION_LABEL_HIGHLIGHT",
    "MENTION_URI_HIGHLIGHT",
    "CandidateSource",
    "Composer",
    "safe_mention",
]

MAX_LABEL_CHARS = labels.MAX_LABEL_CHARS


def _wall_clock_ms() -> int:
    """``core.log.now_ms`` looked up at call time (so a test can patch it)."""
    return core.log.now_ms()


CandidateSource = Callable[[str], Awaitable[Sequence[SessionReferenceCandidate | SessionDiscovery]]]
"""Given the text typed after ``@``, the sessions to offer: candidates (at most
``candidate_limit``), then sessions found by what was said in them (``SessionDiscovery``
with a hit; at most ``candidate_limit`` more), as ``SessionReferenceService.discover``
gives them."""

_NEWLINE_KEYS = frozenset({"shift+enter", "ctrl+j", "alt+enter"})


def safe_mention(candidate: SessionReferenceCandidate) -> str:
    """The mention to insert for ``candidate``: ``core.references.labels.safe_mention`` (one
    line, bounded, no control/format characters, no ``<``/``>``, brackets escaped)."""
    return labels.safe_mention(candidate.session_id, candidate.label)


class Composer(ChipArea):
    """Multi-line message editor with history, ``@`` mentions and a session picker.

    The app sets ``candidate_source`` (an async callable, see :data:`CandidateSource`),
    ``max_references`` and ``send_enabled``; it appends sent drafts with
    :meth:`add_to_history`. ``now_ms`` (the picker's clock) can be injected for tests.
    """

    DEFAULT_CSS = """
    Composer {
        width: 1fr;
        height: auto;
        min-height: 3;
        max-height: 12;
        border: tall $border-blurred;
        padding: 0 1;

        &:focus {
            border: tall $border;
        }

        & .composer--mention-label {
            color: $accent;
            text-style: bold;
        }

        & .composer--mention-uri {
            color: $foreground 45%;
        }

        & .composer--mention-chip {
            color: $accent;
            background: $accent 20%;
            text-style: bold;
        }
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "submit", "Send", show=True),
        Binding("shift+enter,ctrl+j", "newline", "Newline", show=True),
    ]

    send_enabled: reactive[bool] = reactive(True, bindings=True)
    """When False, Enter posts :class:`SendBlocked` instead of :class:`Submitted` (and the
    footer shows Send dimmed)."""

    class Submitted(Message):
        """Enter was pressed: ``text`` is the raw draft (mentions intact)."""

        def __init__(self, composer: Composer, text: str) -> None:
            super().__init__()
            self.composer = composer
            self.text = text

        @property
        def control(self) -> Composer:
            return self.composer

    class HistoryWanted(Message):
        """Up went past the oldest history entry while ``history_incomplete``: the owner
        may read older sent messages and give them with ``set_history(keep_place=True)``."""

        def __init__(self, composer: Composer) -> None:
            super().__init__()
            self.composer = composer

        @property
        def control(self) -> Composer:
            return self.composer

    class SendBlocked(Message):
        """Enter was pressed while ``send_enabled`` is False."""

        def __init__(self, composer: Composer) -> None:
            super().__init__()
            self.composer = composer

        @property
        def control(self) -> Composer:
            return self.composer

    def __init__(
        self,
        text: str = "",
        *,
        candidate_source: CandidateSource | None = None,
        max_references: int = 3,
        candidate_limit: int = 50,
        now_ms: Callable[[], int] | None = None,
        cursor_blink: bool = True,
        placeholder: str = "",
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
        disabled: bool = False,
    ) -> None:
        # TextArea.__init__ already moves the cursor and builds highlights: state first.
        self._mention_at: Location | None = None
        self._mention_query: str | None = None
        self._lookup_generation = 0
        super().__init__(
            text,
            soft_wrap=True,
            tab_behavior="focus",
            show_line_numbers=False,
            highlight_cursor_line=False,
            placeholder=placeholder,
            name=name,
            id=id,
            classes=classes,
            disabled=disabled,
        )
        self.set_reactive(TextArea.cursor_blink, cursor_blink)
        self.set_reactive(TextArea.match_cursor_bracket, False)
        self.candidate_source: CandidateSource | None = candidate_source
        """Async lookup of picker rows; ``None`` shows an empty picker."""
        self.max_references = max_references
        """How many distinct sessions one message may reference (shown in the picker)."""
        self.candidate_limit = candidate_limit
        """At most this many rows are listed (the source should already cut there)."""
        self.now_ms: Callable[[], int] = now_ms if now_ms is not None else _wall_clock_ms
        """Clock for the picker's relative ages, in epoch milliseconds."""
        self._history = SentHistory()
        self._picker = MentionPicker(self, now_ms=lambda: self.now_ms())

    # ------------------------------------------------------------------ public API

    @property
    def sent_history(self) -> list[str]:
        """Sent messages, newest last; Up on the first line / Down on the last walk it.
        (``TextArea.history`` is the undo history, hence the different name.)"""
        return self._history.entries

    @property
    def history_incomplete(self) -> bool:
        """True when older sent messages may exist beyond :attr:`sent_history` (see
        :class:`HistoryWanted`)."""
        return self._history.incomplete

    @history_incomplete.setter
    def history_incomplete(self, value: bool) -> None:
        self._history.incomplete = value

    @property
    def picker(self) -> MentionPicker:
        """The picker overlay (mounted on this composer's screen)."""
        return self._picker

    @property
    def picker_open(self) -> bool:
        return self._mention_at is not None

    @property
    def draft(self) -> str:
        """The raw draft text, mentions intact (each chip expanded to its full mention)."""
        return self._chips.expand(self.text)

    @property
    def shown_text(self) -> str:
        """The draft as drawn: each chip as ``@label``."""
        return self._chips.display(self.text)

    @property
    def reference_spans(self) -> list[SessionReferenceSpan]:
        """Every mention and bare token in the draft (valid or not), left to right."""
        return list(self._reference_spans)

    @property
    def reference_count(self) -> int:
        """How many distinct sessions the draft validly references."""
        return len({span.session_id for span in self._reference_spans if span.valid})

    def set_draft(self, text: str) -> None:
        """Replace the draft (cursor at its end), closing the picker and history browsing."""
        self._close_picker()
        self._history.stop()
        self.load_text(self._chips.chipify(text))
        self.move_cursor(self.document.end)

    def clear_draft(self) -> None:
        self.set_draft("")

    def set_history(self, entries: Sequence[str], *, keep_place: bool = False) -> None:
        """Replace the sent-message history (oldest first), e.g. by the open session's own
        messages; blank entries and immediate repeats are skipped. ``keep_place``: the new
        entries extend the old ones at the oldest end, and a walk in progress goes on from
        the entry it shows."""
        self._history.replace(entries, keep_place=keep_place)

    def add_to_history(self, text: str) -> None:
        """Remember a sent message (blank ones and repeats of the newest are skipped)."""
        self._history.add(text)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Send is shown dimmed while it cannot send (Enter then says why)."""
        if action == "submit" and (self.read_only or not self.send_enabled):
            return None
        return super().check_action(action, parameters)

    def action_submit(self) -> None:
        """Post :class:`Submitted` (or :class:`SendBlocked`); a blank draft does nothing."""
        if self.read_only:
            return
        if not self.send_enabled:
            self.post_message(self.SendBlocked(self))
            return
        text = self.draft
        if text.strip():
            self.post_message(self.Submitted(self, text))

    def action_newline(self) -> None:
        if not self.read_only:
            self._replace_via_keyboard("\n", *self.selection)

    # ------------------------------------------------------------------ lifecycle

    def on_mount(self) -> None:
        self.screen.mount(self._picker)

    def on_unmount(self) -> None:
        if self._picker.is_attached:
            self._picker.remove()

    def on_blur(self) -> None:
        self._close_picker()

    def on_resize(self) -> None:
        self._position_picker()

    # ------------------------------------------------------------------ keys

    @staticmethod
    def _consume(event: events.Key) -> None:
        event.stop()
        event.prevent_default()

    async def _on_key(self, event: events.Key) -> None:
        if self.read_only:
            return
        self._restart_blink()
        key = event.key
        if self.picker_open and self._picker_key(event):
            return
        if key in _NEWLINE_KEYS:
            self._consume(event)
            self.action_newline()
        elif key == "enter":
            self._consume(event)
            self.action_submit()
        elif (key == "up" and self._history_up()) or (key == "down" and self._history_down()):
            self._consume(event)
        elif event.character == "@":
            self._consume(event)
            self._type_at_sign()

    def _picker_key(self, event: events.Key) -> bool:
        """Route a key to the open picker; True when it was consumed."""
        key = event.key
        if key == "escape":
            self._consume(event)
            self._close_picker()
            return True
        if key in ("up", "down"):
            self._consume(event)
            self._picker.move_highlight(-1 if key == "up" else 1)
            return True
        if key in ("enter", "tab"):
            candidate = self._picker.highlighted_candidate
            if candidate is not None:
                self._consume(event)
                self._pick(candidate)
                return True
            self._close_picker()
            if key == "tab":
                self._consume(event)
                return True
        return False  # Enter with nothing to pick: sends as usual

    def _type_at_sign(self) -> None:
        start, end = sorted(self.selection)
        row, col = start
        before = self.document.get_line(row)[col - 1] if col > 0 else ""
        result = self._replace_via_keyboard("@", start, end)
        if result is None:
            return
        if opens_picker(before):
            at_row, at_col = result.end_location
            self._open_picker((at_row, at_col - 1))

    # ------------------------------------------------------------------ history

    def _on_first_visual_line(self) -> bool:
        return self.wrapped_document.location_to_offset(self.cursor_location).y == 0

    def _on_last_visual_line(self) -> bool:
        y = self.wrapped_document.location_to_offset(self.cursor_location).y
        return bool(y >= self.wrapped_document.height - 1)

    def _history_up(self) -> bool:
        if not self.selection.is_empty or not self._on_first_visual_line():
            return False
        return self._take_history_step(self._history.up(self.draft))

    def _history_down(self) -> bool:
        if not self._history.walking(self.draft) or not self.selection.is_empty:
            return False
        if not self._on_last_visual_line():
            return False
        return self._take_history_step(self._history.down(self.draft))

    def _take_history_step(self, step: HistoryStep | None) -> bool:
        """Show what the walk gives (True: the key was the history's)."""
        if step is None:
            return False
        if step.show is not None:
            self.replace(
                self._chips.chipify(step.show),
                (0, 0),
                self.document.end,
                maintain_selection_offset=False,
            )
        if step.want_older:
            self.post_message(self.HistoryWanted(self))
        return True

    # ------------------------------------------------------------------ picker

    def _open_picker(self, at: Location) -> None:
        self._mention_at = at
        self._mention_query = None
        self._picker.set_header(self.reference_count, self.max_references)
        self._picker.show_candidates(())
        self._picker.open()
        self._sync_picker()

    def _close_picker(self) -> None:
        if self._mention_at is None:
            return
        self._mention_at = None
        self._mention_query = None
        self._lookup_generation += 1
        self.workers.cancel_group(self, "mention-lookup")
        self._picker.close()

    def _current_query(self) -> str | None:
        """The text between the ``@`` and the cursor, or None when the cursor left it."""
        if self._mention_at is None:
            return None
        start, end = self.selection
        if start != end:
            return None
        at_row, at_col = self._mention_at
        row, col = end
        if row != at_row or at_row >= self.document.line_count:
            return None
        return mention_query(self.document.get_line(at_row), at_col, col)

    def _sync_picker(self) -> None:
        """Follow the cursor: close, re-query or just re-place the open picker."""
        if self._mention_at is None:
            return
        query = self._current_query()
        if query is None:
            self._close_picker()
            return
        if query != self._mention_query:
            self._mention_query = query
            self._request_lookup(query)
        self._position_picker()

    def _request_lookup(self, query: str) -> None:
        self._lookup_generation += 1
        if self.candidate_source is None:
            self._picker.show_candidates(())
            return
        self._picker.show_searching()
        self._lookup(query, self._lookup_generation)

    @work(exclusive=True, group="mention-lookup", exit_on_error=False)
    async def _lookup(self, query: str, generation: int) -> None:
        """Ask the source for rows; a newer keystroke cancels this and stale rows are dropped."""
        source = self.candidate_source
        if source is None:
            return
        try:
            rows = list(await source(query))
        except Exception as error:
            if generation == self._lookup_generation and self.picker_open:
                self.log.warning(f"mention lookup failed: {error!r}")
                self._picker.show_error()
                self._position_picker()
            return
        if generation != self._lookup_generation or not self.picker_open:
            return
        limit = max(0, self.candidate_limit)
        plain = [r for r in rows if not (isinstance(r, SessionDiscovery) and r.hit)][:limit]
        found = [r for r in rows if isinstance(r, SessionDiscovery) and r.hit][:limit]
        self._picker.show_candidates([*plain, *found])
        self._position_picker()

    def _position_picker(self) -> None:
        """Put the picker next to the ``@``: above the cursor line when there is room."""
        if self._mention_at is None or not self.is_mounted or not self._picker.is_attached:
            return
        cursor = self.cursor_screen_offset
        screen_width, screen_height = self.screen.size
        self._picker.fit_width(screen_width)
        height = self._picker.expected_height
        width = min(self._picker.expected_width, screen_width)
        x = cursor.x - cell_len("@" + (self._mention_query or ""))
        x = max(0, min(x, screen_width - width))
        # Above the whole composer (its border included) when it fits, else below the cursor.
        top = self.region.y
        y = top - height if top - height >= 0 else cursor.y + 1
        y = max(0, min(y, screen_height - height))
        self._picker.styles.offset = (x, y)

    def _pick(self, candidate: SessionReferenceCandidate) -> None:
        """Replace ``@query`` by the candidate's mention (one chip) and one space; cursor after
        it. At the reference limit a new session is refused (the picker stays open and says so).
        """
        at = self._mention_at
        if at is None:
            return
        referenced = [s.session_id for s in self._reference_spans if s.valid and s.session_id]
        if refuses_pick(referenced, candidate.session_id, self.max_references):
            self._picker.show_limit_refusal(self.max_references)
            self._position_picker()
            return
        end = self.cursor_location
        self._close_picker()
        mention = safe_mention(candidate)
        chip = self._chips.chipify(mention)
        self.replace(chip + " ", at, end, maintain_selection_offset=False)

    def on_mention_picker_picked(self, message: MentionPicker.Picked) -> None:
        message.stop()
        if message.picker is not self._picker or not self.picker_open:
            return
        candidates = self._picker.candidates
        if 0 <= message.index < len(candidates):
            self._pick(candidates[message.index])
        if not self.has_focus:
            self.focus()

    # ------------------------------------------------------------------ edits

    def watch_selection(self) -> None:
        self._sync_picker()

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        if event.text_area is not self:
            return
        self._sync_picker()
        if self.picker_open:
            self._picker.set_header(self.reference_count, self.max_references)
