"""Surface folding (SPEC §2.3): the current conversation a log describes.

Nodes live in a doubly linked list indexed by seq, so a replace costs the length of the
run it shadows and a whole fold is linear in the log.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Generic, Protocol, TypeVar

from core.errors import InvalidEventError
from core.log import Replace, SurfaceOp

__all__ = ["Foldable", "SurfaceFolder", "fold_surface"]

T = TypeVar("T")


class Foldable(Protocol):
    """What folding reads of an event: an ``Event`` or a light ``SurfaceRow``."""

    @property
    def seq(self) -> int: ...

    @property
    def surface_op(self) -> SurfaceOp | None: ...

    @property
    def source_event_seqs(self) -> Sequence[int] | None: ...


F = TypeVar("F", bound=Foldable)


class _Node(Generic[T]):
    __slots__ = ("item", "next", "prev", "seq")

    def __init__(self, seq: int, item: T | None) -> None:
        self.seq = seq
        self.item = item
        self.prev: _Node[T] | None = None
        self.next: _Node[T] | None = None


class SurfaceFolder(Generic[T]):
    """Folds surface operations in seq order; rejects a bad one without changing anything.

    ``T`` is whatever the caller wants back per node (an ``Event``, or just its seq).
    """

    def __init__(self) -> None:
        self._head: _Node[T] = _Node(-1, None)
        self._tail: _Node[T] = _Node(-1, None)
        self._head.next = self._tail
        self._tail.prev = self._head
        self._by_seq: dict[int, _Node[T]] = {}

    def __len__(self) -> int:
        return len(self._by_seq)

    def __contains__(self, seq: object) -> bool:
        return seq in self._by_seq

    def check(
        self, seq: int, surface_op: SurfaceOp, source_event_seqs: Sequence[int] | None
    ) -> list[int]:
        """Validate an operation at ``seq``; return the seqs it would shadow."""
        if source_event_seqs is not None:
            for s in source_event_seqs:
                if s >= seq:
                    raise InvalidEventError(
                        f"source_event_seqs entry {s} is not lower than the event's seq {seq}"
                    )
        if surface_op == "append":
            return []
        if not isinstance(surface_op, Replace):
            raise InvalidEventError(f"invalid surface_op {surface_op!r}")
        start = self._by_seq.get(surface_op.start)
        end = self._by_seq.get(surface_op.end)
        if start is None or end is None:
            missing = surface_op.start if start is None else surface_op.end
            raise InvalidEventError(f"replace refers to seq {missing}, which is not on the surface")
        shadowed: list[int] = []
        node: _Node[T] | None = start
        while node is not None and node is not self._tail:
            shadowed.append(node.seq)
            if node is end:
                break
            node = node.next
        else:
            raise InvalidEventError(
                f"replace start {surface_op.start} comes after its end {surface_op.end}"
            )
        listed = set(source_event_seqs or ())
        missing_provenance = [s for s in shadowed if s not in listed]
        if missing_provenance:
            raise InvalidEventError(
                f"replace must list every shadowed seq in source_event_seqs; missing {missing_provenance}"
            )
        return shadowed

    def apply(
        self,
        seq: int,
        surface_op: SurfaceOp,
        source_event_seqs: Sequence[int] | None,
        item: T,
    ) -> list[int]:
        """Check then apply; returns the shadowed seqs."""
        shadowed = self.check(seq, surface_op, source_event_seqs)
        node: _Node[T] = _Node(seq, item)
        if isinstance(surface_op, Replace):
            first = self._by_seq[shadowed[0]]
            last = self._by_seq[shadowed[-1]]
            before, after = first.prev, last.next
            assert before is not None and after is not None
            for s in shadowed:
                del self._by_seq[s]
        else:
            after = self._tail
            before = self._tail.prev
            assert before is not None
        node.prev, node.next = before, after
        before.next = node
        after.prev = node
        self._by_seq[seq] = node
        return shadowed

    def extend_appended(self, items: Iterable[tuple[int, T]]) -> None:
        """Append already-validated ``(seq, item)`` plain appends, in seq order, in bulk."""
        tail_prev = self._tail.prev
        assert tail_prev is not None
        for seq, item in items:
            node: _Node[T] = _Node(seq, item)
            node.prev = tail_prev
            tail_prev.next = node
            self._by_seq[seq] = node
            tail_prev = node
        tail_prev.next = self._tail
        self._tail.prev = tail_prev

    def items(self) -> list[T]:
        """The current surface, in node order."""
        out: list[T] = []
        node = self._head.next
        while node is not None and node is not self._tail:
            out.append(node.item)  # type: ignore[arg-type]
            node = node.next
        return out

    def seqs(self) -> list[int]:
        out: list[int] = []
        node = self._head.next
        while node is not None and node is not self._tail:
            out.append(node.seq)
            node = node.next
        return out


def fold_surface(events: Iterable[F]) -> list[F]:
    """The current surface of a log, in node order. Log-only events are skipped.

    Raises ``InvalidEventError`` if the log breaks a folding rule. Logs without replaces
    (the common case) take a list-only path; the linked list starts at the first replace.
    """
    surface: list[F] = []
    iterator = iter(events)
    for event in iterator:
        op = event.surface_op
        if op is None:
            continue
        if op != "append":
            folder: SurfaceFolder[F] = SurfaceFolder()
            folder.extend_appended((e.seq, e) for e in surface)
            folder.apply(event.seq, op, event.source_event_seqs, event)
            for later in iterator:
                if later.surface_op is not None:
                    folder.apply(later.seq, later.surface_op, later.source_event_seqs, later)
            return folder.items()
        sources = event.source_event_seqs
        if sources and max(sources) >= event.seq:
            raise InvalidEventError(
                f"source_event_seqs entry {max(sources)} is not lower than the event's seq {event.seq}"
            )
        surface.append(event)
    return surface
