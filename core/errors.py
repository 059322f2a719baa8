"""Typed errors shared by every layer (stores raise them, hosts explain them)."""

from __future__ import annotations

from typing import Literal

__all__ = [
    "DiskFullError",
    "DshError",
    "InvalidEventError",
    "LeaseLostError",
    "ReplyUnsavedError",
    "SearchQueryError",
    "SessionBusyError",
    "SessionExistsError",
    "SessionNotFoundError",
    "SessionReadOnlyError",
    "ShareError",
    "StoreError",
    "StoreUnreachableError",
]


class DshError(Exception):
    """Base of every error dsh raises on purpose."""


class SessionNotFoundError(DshError, LookupError):
    """No session with that id exists in the store."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"no session with id {session_id!r}")
        self.session_id = session_id


class SessionExistsError(DshError, ValueError):
    """``create_session`` was given an id that is already taken."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"a session with id {session_id!r} already exists")
        self.session_id = session_id


class InvalidEventError(DshError, ValueError):
    """An append broke a log rule (bad type, data, surface op or provenance); nothing was written."""


class StoreError(DshError):
    """The store itself cannot be used (not a database, corrupt, newer schema, read-only…)."""


class StoreUnreachableError(StoreError):
    """The store's server cannot be reached now (down, restarting, the connection cut): a
    fault that passes, so a host may wait and try again. A write it interrupted may or may
    not have been stored; it is never repeated blindly."""


class ReplyUnsavedError(StoreUnreachableError):
    """The server stayed unreachable after a reply ended: the reply (the text already
    shown) is kept in memory by its ``ChatSession`` and stored before anything else it
    writes in that session (the next message), once the server is back."""


class DiskFullError(StoreError):
    """The store could not write because the disk (or the database's size limit) is full.

    Its message always says so in plain words; what was stored before the failure stays."""


class SessionBusyError(DshError):
    """Another writer (usually another process) holds the session's reply lease: one reply
    or compaction at a time per session, so this one was refused before anything was stored."""

    MESSAGE = "the session is busy: another process is writing a reply or compacting it"

    def __init__(self, session_id: str, holder: str | None = None) -> None:
        super().__init__(self.MESSAGE)
        self.session_id = session_id
        # Who held the lease when it was refused (None: unknown). A holder that is not a
        # process known to run on this machine may be gone: `dsh unlock` frees its session.
        self.holder = holder


class LeaseLostError(DshError):
    """Another writer took the session's reply lease while this one wrote: its lease was
    broken (``dsh unlock``) or ran out during a stall and was taken. The reply (or the
    compaction, or the user's message before it: ``what``) stopped at once and stores
    nothing more; what it stored before stays, as of a writer that was killed.
    ``holder``: who holds the lease now (``None``: nobody, or unknown)."""

    def __init__(
        self,
        session_id: str,
        what: Literal["reply", "compaction", "message"] = "reply",
        holder: str | None = None,
    ) -> None:
        done = "the message was not sent" if what == "message" else f"the {what} stopped"
        super().__init__(f"another writer took the session's reply lease: {done}")
        self.session_id = session_id
        self.what = what
        self.holder = holder


class SessionReadOnlyError(DshError):
    """A write (append, rename, compact, delete, lease, share) to a session the user may
    read but does not own (issue 17): only its owner writes it; nothing was stored.

    A session the user may not read at all raises ``SessionNotFoundError`` instead, exactly
    as a deleted one does, so nobody learns that it exists."""

    def __init__(self, session_id: str, owner: str) -> None:
        super().__init__(f"the session is read-only: it is owned by {owner}")
        self.session_id = session_id
        self.owner = owner


class ShareError(DshError, ValueError):
    """A grant that cannot be made (no such user, sharing with oneself, an empty name);
    nothing was stored."""


class SearchQueryError(DshError, ValueError):
    """A search query dsh will not run (a term longer than ``core.search.MAX_TERM_CHARS``):
    said in one line, before anything is asked of a store."""
