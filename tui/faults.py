"""Ordinary faults of the TUI's store calls, and the words a user reads for them.

Every store or query call the app makes can fail for reasons outside dsh: the session was
deleted by another process, another process holds the write lock past the busy timeout,
the disk is full, a write no longer fits the log (another process changed it). None of
these may crash the app or touch the draft: the app runs each such call inside
:class:`FaultGuard`, which hands the error to one reporter (a notice) and lets the app go on.
Anything else is a bug and still crashes (with a non-zero exit status).
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from types import TracebackType

from core.display import single_line
from core.engine import CompactionError
from core.errors import DshError, SessionNotFoundError, StoreError

__all__ = ["FAULTS", "FaultGuard", "fault_message", "is_locked"]

FAULTS: tuple[type[BaseException], ...] = (DshError, OSError)
"""What a store call may raise for reasons outside dsh (``DshError`` covers
``SessionNotFoundError``, ``StoreError``, ``InvalidEventError`` and ``CompactionError``)."""

_DETAIL_CHARS = 200


def is_locked(err: BaseException) -> bool:
    """True when another connection held the database's write lock past the busy timeout."""
    text = str(err)
    return isinstance(err, StoreError) and (
        "database is locked" in text or "database table is locked" in text
    )


def fault_message(err: BaseException, doing: str) -> str:
    """One line saying what could not be done (``doing``: "rename the session") and why."""
    if isinstance(err, SessionNotFoundError):
        return f"Could not {doing}: the session no longer exists (deleted elsewhere?)."
    if is_locked(err):
        return (
            f"Could not {doing}: the database is busy (another dsh is writing to it). "
            "Try again in a moment."
        )
    if isinstance(err, CompactionError):  # its words already say what was not done
        detail = single_line(str(err), _DETAIL_CHARS)
        return detail[:1].upper() + detail[1:] + "."
    if isinstance(err, OSError) and err.errno == errno.ENOSPC:
        return f"Could not {doing}: the disk is full."
    if isinstance(err, OSError) and err.strerror:
        where = f" ({single_line(str(err.filename), 80)})" if err.filename else ""
        return f"Could not {doing}: {single_line(err.strerror, _DETAIL_CHARS)}{where}."
    return f"Could not {doing}: {single_line(str(err), _DETAIL_CHARS)}"


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
