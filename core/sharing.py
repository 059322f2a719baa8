"""Who may read a session besides its owner (issue 17): the grants ``dsh share`` makes."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Share"]


@dataclass(frozen=True, slots=True)
class Share:
    """``grantee`` may read (never write) the session ``session_id`` owned by ``owner``."""

    session_id: str
    owner: str
    grantee: str
