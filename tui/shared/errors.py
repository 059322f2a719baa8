"""The words a user reads for every error dsh reports, in one place for all three front ends.

The app shows them in its notice bar, the CLI prints them after ``dsh:``, the ACP agent puts
them in a JSON-RPC error. Each error is described once here (``describe_error``); a front end
only frames the line (a capital and a period in the app, ``[CODE]`` after a reference error).
Every piece of untrusted text in a description (a session id or label, a path, a server's
message) is already made one safe line (``core.display.single_line``): hosts print it as is,
as plain text, never as markup.
"""

from __future__ import annotations

import errno
import shlex
from collections.abc import Callable

from core.display import single_line
from core.engine import CompactionError
from core.errors import (
    DiskFullError,
    LeaseLostError,
    SessionBusyError,
    SessionNotFoundError,
    SessionReadOnlyError,
    StoreError,
)
from core.leases import holder_runs_here
from core.references.config import (
    SESSION_REFERENCE_BUDGET_EXCEEDED,
    SESSION_REFERENCE_CANCELLED,
    SESSION_REFERENCE_INVALID_CONFIG,
    SESSION_REFERENCE_INVALID_REFERENCE,
    SESSION_REFERENCE_READ_FAILED,
    SESSION_REFERENCE_SELF_REFERENCE,
    SESSION_REFERENCE_TOO_MANY,
    SessionReferenceError,
)

__all__ = [
    "DETAIL_CHARS",
    "LEASE_LOST_WORDS",
    "REFERENCE_ERROR_WORDS",
    "describe_error",
    "fault_message",
    "is_locked",
    "sentence",
    "unlock_hint",
]

DETAIL_CHARS = 200
"""How much of an error's own text (a server's message, a path) a description keeps."""

NAME_CHARS = 60
"""How much of a session's name (its label or id) a description keeps."""

REFERENCE_ERROR_WORDS: dict[str, str] = {
    SESSION_REFERENCE_SELF_REFERENCE: "a message cannot reference its own session",
    SESSION_REFERENCE_TOO_MANY: "too many referenced sessions in one message",
    SESSION_REFERENCE_READ_FAILED: "a referenced session could not be read",
    SESSION_REFERENCE_BUDGET_EXCEEDED: "a referenced session is too large for the snapshot budget",
    SESSION_REFERENCE_INVALID_REFERENCE: "the message holds a malformed session mention",
    SESSION_REFERENCE_CANCELLED: "preparing the referenced sessions was cancelled",
    SESSION_REFERENCE_INVALID_CONFIG: "the session-reference limits are invalid",
}
"""The plain words for each ``SESSION_REFERENCE_*`` code (SPEC §4); the code itself is
shown beside them by each host."""

_REFERENCE_FALLBACK = "the session references could not be prepared"

LEASE_LOST_WORDS = (
    "another process took this session's reply lease (it was broken with `dsh unlock`, or "
    "ran out while this dsh stalled)"
)
"""The start of every ``LeaseLostError``'s words; what stopped follows it."""
_LEASE_LOST_ENDS = {
    "reply": "the reply stopped; your message is saved, the partial reply is not",
    "compaction": "the compaction stopped; nothing was compacted",
    "message": "nothing was sent",
}

# Codes whose core message adds nothing a user needs to the plain words.
_WORDS_ONLY = {SESSION_REFERENCE_SELF_REFERENCE, SESSION_REFERENCE_CANCELLED}


def is_locked(err: BaseException) -> bool:
    """True when another connection held the database's write lock past the busy timeout."""
    text = str(err)
    return isinstance(err, StoreError) and (
        "database is locked" in text or "database table is locked" in text
    )


def unlock_hint(err: SessionBusyError) -> str | None:
    """How to free a session whose lease holder may be gone: ``dsh unlock SESSION``, unless
    the holder is a process that runs on this machine (someone surely is writing) or the
    holder is not known."""
    if err.holder is None or holder_runs_here(err.holder):
        return None
    return f"`dsh unlock {shlex.quote(single_line(err.session_id))}` frees it"


def _detail(err: BaseException) -> str:
    return single_line(str(err), DETAIL_CHARS) or type(err).__name__


def _reference_words(err: SessionReferenceError, name_of: Callable[[str], str] | None) -> str:
    plain = REFERENCE_ERROR_WORDS.get(err.code, _REFERENCE_FALLBACK)
    if err.code in _WORDS_ONLY:
        return plain
    if err.session_id is not None and err.code in (
        SESSION_REFERENCE_READ_FAILED,
        SESSION_REFERENCE_BUDGET_EXCEEDED,
    ):
        name = err.session_id if name_of is None else name_of(err.session_id)
        who = f"the referenced session '{single_line(name, NAME_CHARS)}'"
        if err.code == SESSION_REFERENCE_BUDGET_EXCEEDED:
            return f"{who} is too large for the snapshot budget, even shortened"
        if isinstance(err.__cause__, SessionNotFoundError):
            return f"{who} does not exist (was it deleted?)"
        cause = err.__cause__
        reason = _detail(cause) if cause is not None else _detail(err)
        return f"{who} could not be read: {reason}"
    return f"{plain}: {_detail(err)}"


def describe_error(err: BaseException, *, name_of: Callable[[str], str] | None = None) -> str:
    """What went wrong, in plain words, as one safe line starting in lower case.

    ``name_of`` turns a referenced session's id into what this host calls it (the app uses
    the mention's label); without it the id is shown. Never a Python repr or a traceback.
    """
    if isinstance(err, SessionReferenceError):
        return _reference_words(err, name_of)
    if isinstance(err, SessionBusyError):
        hint = unlock_hint(err)
        return err.MESSAGE if hint is None else f"{err.MESSAGE} (if none is, {hint})"
    if isinstance(err, LeaseLostError):
        return f"{LEASE_LOST_WORDS}: {_LEASE_LOST_ENDS.get(err.what, _LEASE_LOST_ENDS['reply'])}"
    if isinstance(err, SessionReadOnlyError):
        return (
            f"the session is read-only: it is owned by {single_line(err.owner, NAME_CHARS)} "
            "(only its owner can change it)"
        )
    if isinstance(err, DiskFullError) or (isinstance(err, OSError) and err.errno == errno.ENOSPC):
        return "the disk is full"
    if is_locked(err):
        return "the database is busy (another dsh is writing to it); try again in a moment"
    if isinstance(err, OSError) and err.strerror:
        where = f" ({single_line(str(err.filename), 80)})" if err.filename else ""
        return f"{single_line(err.strerror, DETAIL_CHARS)}{where}"
    return _detail(err)


def sentence(words: str) -> str:
    """``words`` as a sentence: a capital first letter and a final period."""
    text = words[:1].upper() + words[1:]
    return text if text.endswith((".", "?", "!")) else text + "."


def fault_message(err: BaseException, doing: str) -> str:
    """One line saying what could not be done (``doing``: "rename the session") and why.

    For the app's ordinary faults (``tui.app.faults``): the session the user is acting on
    may have been deleted by another process, which is said in those words."""
    if isinstance(err, SessionNotFoundError):
        return f"Could not {doing}: the session no longer exists (deleted elsewhere?)."
    if isinstance(err, (CompactionError, LeaseLostError)):  # their words say what was not done
        return sentence(describe_error(err))
    return sentence(f"Could not {doing}: {describe_error(err)}")
