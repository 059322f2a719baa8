"""Owners and grants in the stores (issue 17): what every store checks the same way.

PostgreSQL enforces who may read and write a session itself (row-level security keyed on
``current_user``). SQLite and the memory store have no roles: there the owner is the OS
user, grants are recorded (so ``dsh migrate`` carries them to PostgreSQL) and enforced in
the store for the user it was opened as, with the same outcome: what a user may not read
does not exist for them (``SessionNotFoundError``), and a session they may read but do not
own is read-only to them (``SessionReadOnlyError``).
"""

from __future__ import annotations

import os
import pwd

from core.display import single_line
from core.errors import SessionReadOnlyError, ShareError
from stores.validation import check_session_id

__all__ = [
    "MAX_USER_LENGTH",
    "check_grantee",
    "check_owner",
    "check_user",
    "os_user",
    "share_target",
]

MAX_USER_LENGTH = 63
"""The longest user name (PostgreSQL's limit on role names, in bytes)."""


def os_user() -> str:
    """The OS user this process runs as (its effective uid's login name, or the uid): the
    owner of what a SQLite or memory store creates."""
    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def check_user(user: object) -> str:
    """A user name: a non-empty str of at most ``MAX_USER_LENGTH`` UTF-8 bytes without
    control characters (``ShareError`` otherwise; the name is shown escaped)."""
    if not isinstance(user, str) or not user.strip():
        raise ShareError("a user name is needed")
    if len(user.encode("utf-8", "surrogatepass")) > MAX_USER_LENGTH or any(
        ch < " " or ch == "\x7f" or "\ud800" <= ch <= "\udfff" for ch in user
    ):
        raise ShareError(f"not a valid user name: {single_line(repr(user), 80)}")
    return user


def check_grantee(user: object, owner: str) -> str:
    """The user a session of ``owner`` is shared with (never the owner itself)."""
    grantee = check_user(user)
    if grantee == owner:
        raise ShareError(f"{grantee} owns the session already")
    return grantee


def share_target(session_id: object, user: object) -> tuple[str, str]:
    """The session and the user a ``share`` or ``unshare`` names, checked (the id, then
    the name) before the session is read; the store then requires that its user owns the
    session (``SessionReadOnlyError`` otherwise) and checks the name with
    ``check_grantee``."""
    return check_session_id(session_id), check_user(user)


def check_owner(session_id: str, owner: str | None, user: str) -> None:
    """Refuse a write by ``user`` to a session (that ``user`` may read) owned by ``owner``."""
    if owner != user:
        raise SessionReadOnlyError(session_id, owner or "nobody")
