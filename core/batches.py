"""Events handed to a store's ``import_session`` a batch at a time (issue 31).

A log read from a file is validated and stored as it is read, so that memory is bounded
by a batch rather than by the log: the store takes one batch after another inside the one
transaction of the import, and a problem anywhere (a bad line, a store rule) still leaves
nothing stored. Producing a batch may read a file: a store asks for the next one off its
event loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from core.log import NewEvent

__all__ = ["EventBatches"]


class EventBatches:
    """The events of a session, in order, as consecutive batches (read once)."""

    __slots__ = ("_batches",)

    def __init__(self, batches: Iterable[Sequence[NewEvent]]) -> None:
        self._batches = iter(batches)

    def __iter__(self) -> Iterator[Sequence[NewEvent]]:
        return self._batches

    def next_batch(self) -> Sequence[NewEvent] | None:
        """The next batch, ``None`` after the last (may block: reads the source)."""
        return next(self._batches, None)
