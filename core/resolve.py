"""Naming a session on the command line: exact id, exact title, or unique id prefix."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from core.errors import DshError
from core.log import SessionHeader
from core.query import SessionTitle
from core.surrogates import merge_surrogate_pairs

__all__ = ["SessionNameError", "resolve_session_name"]


class SessionNameError(DshError, LookupError):
    """The name matches no session, or more than one (``matches``: each one's header and
    title, in list order, for the host to show one per line)."""

    def __init__(
        self, message: str, matches: Sequence[tuple[SessionHeader, str | None]] = ()
    ) -> None:
        super().__init__(message)
        self.matches = tuple(matches)


def resolve_session_name(
    name: str, headers: Sequence[SessionHeader], titles: Mapping[str, SessionTitle]
) -> SessionHeader:
    """A full id names its session, always (so every session can be named). Otherwise the
    name must match exactly one session by exact title or id prefix, counted together: a
    name that is one session's title and another's id prefix is ambiguous, never a guess.
    A surrogate pair in the name is its character (SPEC §4.1), as in the stored ids."""
    name = merge_surrogate_pairs(name)
    for header in headers:
        if header.id == name:
            return header
    matches = [
        h
        for h in headers
        if (h.id in titles and titles[h.id].title == name) or (name and h.id.startswith(name))
    ]
    if len(matches) == 1:
        return matches[0]
    if matches:
        by_title = sum(1 for h in matches if h.id in titles and titles[h.id].title == name)
        by_prefix = len(matches) - by_title if name else 0
        how = [
            f"{by_title} by title" if by_title else "",
            f"{by_prefix} by id prefix" if by_prefix else "",
        ]
        raise SessionNameError(
            f"{name!r} names {len(matches)} sessions ({', '.join(x for x in how if x)}); "
            "name one by its full id",
            [(h, titles[h.id].title if h.id in titles else None) for h in matches],
        )
    raise SessionNameError(f"no session matches {name!r} (by id, title or id prefix)")
