"""Naming a session on the command line: exact id, exact title, or unique id prefix."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from core.errors import DshError
from core.log import SessionHeader
from core.query import SessionTitle

__all__ = ["SessionNameError", "resolve_session_name"]


class SessionNameError(DshError, LookupError):
    """The name matches no session, or more than one."""


def resolve_session_name(
    name: str, headers: Sequence[SessionHeader], titles: Mapping[str, SessionTitle]
) -> SessionHeader:
    """Exact id first, then exact title (must be unique), then unique id prefix."""
    for header in headers:
        if header.id == name:
            return header
    by_title = [h for h in headers if h.id in titles and titles[h.id].title == name]
    if len(by_title) == 1:
        return by_title[0]
    if len(by_title) > 1:
        raise SessionNameError(f"{len(by_title)} sessions are titled {name!r}; name one by its id")
    if name:
        by_prefix = [h for h in headers if h.id.startswith(name)]
        if len(by_prefix) == 1:
            return by_prefix[0]
        if len(by_prefix) > 1:
            raise SessionNameError(
                f"{len(by_prefix)} session ids start with {name!r}; give more of the id"
            )
    raise SessionNameError(f"no session matches {name!r} (by id, title or id prefix)")
