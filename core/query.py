"""Read-side values and the query seam the session-reference service depends on."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from core.log import Event, SessionHeader, SurfaceOutline

__all__ = [
    "MessageTail",
    "MessageTailSnapshot",
    "SessionQueryLike",
    "SessionTitle",
    "SurfaceOutlineSnapshot",
    "SurfaceSnapshot",
    "SurfaceWindow",
    "TailWalk",
    "message_tail",
]


@dataclass(frozen=True, slots=True)
class SurfaceSnapshot:
    """One consistent read of a session: its header, the seq of its last raw event
    (``None`` for an empty log) and its folded current surface (immutable)."""

    session: SessionHeader
    captured_through_seq: int | None
    events: tuple[Event, ...]


@dataclass(frozen=True, slots=True)
class SurfaceOutlineSnapshot:
    """``SurfaceSnapshot`` without event data: the folded surface's ``SurfaceOutline``
    rows (node order), each saying what it projects to (see ``projection_code``)."""

    session: SessionHeader
    captured_through_seq: int | None
    nodes: tuple[SurfaceOutline, ...]


@dataclass(frozen=True, slots=True)
class MessageTail:
    """What ``prepare`` needs of a surface's messages, bounded by a byte ``budget`` (see
    :func:`message_tail`, which defines it; stores compute it from what they keep).

    ``nodes``: ``(seq, projection)`` of message nodes (``projection >= 0``, see
    ``projection_code``) in node order: first the ``older_checkpoints`` checkpoints
    that come before the tail, then the tail itself. ``older_messages`` and
    ``older_bytes``: how many non-checkpoint messages come before the tail, and the
    UTF-8 bytes of their projected texts."""

    nodes: tuple[tuple[int, int], ...]
    older_checkpoints: int = 0
    older_messages: int = 0
    older_bytes: int = 0


def message_tail(nodes: Sequence[tuple[int, int]], budget: int) -> MessageTail:
    """The ``MessageTail`` of a folded surface whose message nodes are ``nodes``
    (``(seq, projection)`` in node order; nodes that are no message left out).

    Walking back from the newest node, the tail takes nodes until the UTF-8 bytes of the
    non-checkpoint ones it holds, the newest node not counted, exceed ``budget`` (the
    node that makes them exceed it included); all nodes when they never do."""
    start = len(nodes)
    spent = 0
    newest = len(nodes) - 1
    while start > 0:
        start -= 1
        code = nodes[start][1]
        if start != newest and not code & 2:
            spent += code >> 2
            if spent > budget:
                break
    checkpoints = [node for node in nodes[:start] if node[1] & 2]
    older = [node[1] >> 2 for node in nodes[:start] if not node[1] & 2]
    return MessageTail((*checkpoints, *nodes[start:]), len(checkpoints), len(older), sum(older))


class TailWalk:
    """A store's side of ``message_tail``: fed the surface's message nodes newest first
    (``take``) until it says stop, then given what lies before them (``tail``), it gives
    the same ``MessageTail`` without reading the older nodes one by one."""

    __slots__ = ("_nodes", "_spent", "budget", "exceeded", "start")

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.exceeded = False
        self.start = -1
        """The position (node order) of the oldest node taken."""
        self._nodes: list[tuple[int, int]] = []  # newest first
        self._spent = 0

    def take(self, pos: int, seq: int, code: int) -> bool:
        """Take the next older message node (``pos`` its node order, ``code`` its
        projection); ``True`` once the budget is exceeded: take no more."""
        if self._nodes and not code & 2:  # the newest node is not counted
            self._spent += code >> 2
            self.exceeded = self._spent > self.budget
        self._nodes.append((seq, code))
        self.start = pos
        return self.exceeded

    def tail(
        self, checkpoints: Iterable[Sequence[int]] = (), messages: int = 0, size: int = 0
    ) -> MessageTail:
        """The tail, given (when ``exceeded``) the checkpoint nodes before ``start`` in
        node order (``(seq, projection)`` each) and the surface's count and UTF-8 bytes of
        non-checkpoint messages (the store's running sums)."""
        nodes = self._nodes[::-1]
        if not self.exceeded:
            return MessageTail(tuple(nodes))
        sizes = [code >> 2 for _, code in nodes if not code & 2]
        before = tuple((node[0], node[1]) for node in checkpoints)
        return MessageTail((*before, *nodes), len(before), messages - len(sizes), size - sum(sizes))


@dataclass(frozen=True, slots=True)
class MessageTailSnapshot:
    """One consistent read of a session's header, last raw seq and ``MessageTail``."""

    session: SessionHeader
    captured_through_seq: int | None
    tail: MessageTail


@dataclass(frozen=True, slots=True)
class SurfaceWindow:
    """The newest part of a session's current surface, for showing it without reading all of
    it: every surface seq (node order) and the events of the last ``len(events)`` of them."""

    session: SessionHeader
    captured_through_seq: int | None
    seqs: tuple[int, ...]
    events: tuple[Event, ...]
    unknown: tuple[Event, ...] = ()
    """Events of types dsh does not know (log-only) shown with ``events``: those after
    ``unknown_floor`` and, when earlier surface events are unread, after the first of
    ``events`` too (earlier ones are read with the earlier pages); seq order."""
    unknown_floor: int = -1
    """Unknown events at or before this seq are not part of the current surface: the seq
    of the newest replace on it (the latest compaction's checkpoint), ``-1`` without one
    (when ``complete`` is false it is only known to be below the first of ``seqs``)."""
    complete: bool = True
    """``seqs`` holds every surface seq; when false (a window read from the newest rows
    only, ``SessionQuery.read_surface_page``) it holds only those of ``events``, and
    earlier surface events may exist: ``SessionQuery.read_surface_window`` reads them."""

    @property
    def unread(self) -> tuple[int, ...]:
        """The seqs before ``events`` (older surface events not read yet)."""
        return self.seqs[: len(self.seqs) - len(self.events)]


@dataclass(frozen=True, slots=True)
class SessionTitle:
    """The latest ``session/title`` event of a session."""

    title: str
    event_seq: int
    updated_at: int
    source: Mapping[str, Any]


class SessionQueryLike(Protocol):
    """What ``SessionReferenceService`` needs from a query (``stores.SessionQuery`` is one)."""

    async def list_sessions(self) -> list[SessionHeader]: ...

    async def read_surface(self, session_id: str) -> SurfaceSnapshot: ...

    async def read_title(self, session_id: str) -> SessionTitle | None: ...

    async def read_titles(
        self, session_ids: Sequence[str] | None = None
    ) -> dict[str, SessionTitle]: ...
