"""Walking the sent-message history with Up and Down: which entry comes next, what the
draft was before the walk, when older messages should be read. Textual-free; the
``Composer`` decides when a key may walk (cursor on the first/last line, no selection)
and puts the text it is given into the editor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["HistoryStep", "SentHistory", "clean_history"]


def clean_history(entries: Sequence[str]) -> list[str]:
    """``entries`` without blank ones and immediate repeats (oldest first)."""
    history: list[str] = []
    for entry in entries:
        if entry.strip() and (not history or history[-1] != entry):
            history.append(entry)
    return history


@dataclass(frozen=True)
class HistoryStep:
    """What a key did: ``show`` is the text to put in the editor (``None``: leave it);
    ``want_older`` asks the owner to read older sent messages (once)."""

    show: str | None = None
    want_older: bool = False


class SentHistory:
    """Sent messages, newest last, and where an Up/Down walk through them stands."""

    def __init__(self) -> None:
        self.entries: list[str] = []
        self.incomplete = False
        """True when older sent messages may exist beyond ``entries``."""
        self._index: int | None = None  # the entry shown, while walking
        self._shown = ""  # what the walk put in the editor
        self._saved = ""  # the draft before the walk began

    @property
    def index(self) -> int | None:
        return self._index

    def stop(self) -> None:
        """Forget the walk (the draft was replaced or sent)."""
        self._index = None

    def replace(self, entries: Sequence[str], *, keep_place: bool = False) -> None:
        """New entries (cleaned). ``keep_place``: they extend the old ones at the oldest
        end, and a walk in progress goes on from the entry it shows."""
        index, old_count = self._index, len(self.entries)
        self.entries = clean_history(entries)
        if keep_place and index is not None:
            self._index = max(0, index + len(self.entries) - old_count)
        else:
            self._index = None

    def add(self, text: str) -> None:
        """Remember a sent message (blank ones and repeats of the newest are skipped)."""
        self._index = None
        if text.strip() and (not self.entries or self.entries[-1] != text):
            self.entries.append(text)

    def walking(self, draft: str) -> bool:
        """Whether a walk is in progress; editing the recalled entry ends it (it is the
        draft now)."""
        if self._index is not None and draft != self._shown:
            self._index = None
        return self._index is not None

    def up(self, draft: str) -> HistoryStep | None:
        """Up on the first line; ``None`` when the key is not the history's."""
        if not self.entries:
            if self.incomplete and not draft:
                self.incomplete = False
                return HistoryStep(want_older=True)
            return None
        if not self.walking(draft):
            self._saved = draft
            index = len(self.entries) - 1
        elif self._index:
            index = self._index - 1
        else:  # already at the oldest entry; older ones may be read: ask once
            want = self.incomplete
            self.incomplete = False
            return HistoryStep(want_older=want)
        return self._show(index, self.entries[index])

    def down(self, draft: str) -> HistoryStep | None:
        """Down on the last line; ``None`` when not walking (the key is the editor's)."""
        if not self.walking(draft):
            return None
        assert self._index is not None
        index = self._index + 1
        if index >= len(self.entries):
            return self._show(None, self._saved)
        return self._show(index, self.entries[index])

    def _show(self, index: int | None, text: str) -> HistoryStep:
        self._index = index
        self._shown = text
        return HistoryStep(show=text)
