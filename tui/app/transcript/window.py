"""The transcript's paging arithmetic: which items are mounted, which page is read or
mounted next, what a long live session prunes, what "Load earlier messages" says, and which
item keeps the reader's place. Textual-free; the ``Transcript`` widget only calls it.

Items are counted oldest first. Of the items read so far, ``entries[first:]`` are mounted;
``unread`` holds the surface seqs before them whose events were not read yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "EarlierRead",
    "Span",
    "earlier_mount_start",
    "earlier_read",
    "first_mounted",
    "load_earlier_label",
    "place_to_keep",
    "prune_count",
]


def first_mounted(entry_count: int, page_size: int) -> int:
    """After a load, only the newest page is mounted: the index of its first item."""
    return max(0, entry_count - page_size)


@dataclass(frozen=True)
class EarlierRead:
    """What "Load earlier messages" reads when nothing unmounted is left in memory: the
    newest ``page`` of the unread seqs, after one ``context`` seq (dropped once classified)."""

    page: tuple[int, ...]
    context: int | None

    @property
    def seqs(self) -> list[int]:
        """The seqs to read, oldest first."""
        return list(self.page) if self.context is None else [self.context, *self.page]


def earlier_read(unread: Sequence[int], page_size: int) -> EarlierRead:
    """The next page to read of ``unread`` (oldest first); empty when nothing is unread."""
    page = tuple(unread[-page_size:]) if page_size > 0 else ()
    context = unread[-len(page) - 1] if len(unread) > len(page) else None
    return EarlierRead(page, context)


def earlier_mount_start(first: int, page_size: int) -> int:
    """Mounting the previous page above ``entries[first:]``: its first index."""
    return max(0, first - page_size)


def prune_count(mounted: int, max_mounted: int, page_size: int) -> int:
    """How many of the oldest mounted items a following transcript unmounts (0: none).

    Nothing until more than ``max_mounted`` are mounted; then a page's worth more than
    the excess, so pruning happens once a page rather than at every new item."""
    excess = mounted - max_mounted
    if excess <= 0:
        return 0
    return max(excess, mounted - (max_mounted - page_size))


def load_earlier_label(hidden: int, reading: bool, counted: bool = True) -> str | None:
    """The "Load earlier messages" button's words (``None``: hidden, nothing earlier).
    ``counted`` is false while the earlier items were not counted yet (a transcript opened
    from the newest rows only): the words then give no number."""
    if reading:
        return "Loading earlier messages…"
    if hidden > 0:
        return f"Load earlier messages ({hidden:,} more)" if counted else "Load earlier messages"
    return None


@dataclass(frozen=True)
class Span:
    """Where a mounted item lies in the transcript's virtual space (rows)."""

    top: int
    bottom: int  # exclusive


def place_to_keep(spans: Iterable[Span], scroll_top: int) -> tuple[int, int] | None:
    """The item that marks the reader's place, as ``(index, offset from the view's top)``:
    the first item starting inside the view (growth above it is what would move it), else
    the first one straddling the view's top; ``None`` when no item reaches the view.
    ``spans`` is read only as far as needed."""
    straddling: tuple[int, int] | None = None
    for index, span in enumerate(spans):
        if span.top >= scroll_top:
            return index, span.top - scroll_top
        if span.bottom > scroll_top and straddling is None:
            straddling = index, span.top - scroll_top
    return straddling
