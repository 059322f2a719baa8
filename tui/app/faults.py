"""Ordinary faults of the app's store calls, and the guard that turns them into a notice.

Every store or query call the app makes can fail for reasons outside dsh: the session was
deleted by another process, another process holds the write lock past the busy timeout,
the disk is full, a write no longer fits the log (another process changed it). None of
these may crash the app or touch the draft: the app runs each such call inside
:class:`FaultGuard`, which hands the error to one reporter (a notice with the words of
:func:`tui.shared.errors.fault_message`) and lets the app go on. Anything else is a bug and
still crashes (with a non-zero exit status).
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType

from core.errors import DshError

__all__ = ["FAULTS", "FaultGuard"]

FAULTS: tuple[type[BaseException], ...] = (DshError, OSError)
"""What a store call may raise for reasons outside dsh (``DshError`` covers
``SessionNotFoundError``, ``StoreError``, ``InvalidEventError`` and ``CompactionError``)."""


class FaultGuard:
    """``with FaultGuard(report, "rename the session"):`` runs a block of store calls; an
    ordinary fault ends the block, goes to ``report(err, doing)`` and is not raised.
    ``failed`` says whether the block was cut short."""

    def __init__(self, report: Callable[[BaseException, str], None], doing: str) -> None:
        self._report = report
        self._doing = doing
        self.failed = False

    def __enter__(self) -> FaultGuard:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        if exc is None or not isinstance(exc, FAULTS):
            return False
        self.failed = True
        self._report(exc, self._doing)
        return True
