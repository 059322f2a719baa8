"""A reply lease in words (``dsh unlock``): who holds it and how long it has left, each
line made safe to print (a holder string is whatever a process wrote: hostile text)."""

from __future__ import annotations

from core.display import single_line
from core.leases import ReplyLease, holder_runs_here, parse_holder

__all__ = ["HOLDER_CHARS", "describe_lease", "duration"]

HOLDER_CHARS = 160
"""How much of a holder string is shown (``lease_owner``'s are about 120 characters)."""


def duration(ms: int) -> str:
    """A span of time for people: ``25 s``, ``12 min``, ``5 h``, ``3 d`` (whole units, up)."""
    seconds = -(-max(ms, 0) // 1000)
    for unit, size, limit in (("s", 1, 120), ("min", 60, 120), ("h", 3600, 48)):
        if seconds < size * limit:
            return f"{-(-seconds // size)} {unit}"
    return f"{-(-seconds // 86_400)} d"


def _timing(lease: ReplyLease) -> str:
    left = lease.expires_in_ms
    if left <= 0:
        return f"ran out {duration(-left)} ago: it blocks nothing"
    if not lease.live:  # a clock that ran ahead, or a hand-written row
        return f"runs out in {duration(left)}, implausibly late: it counts as run out"
    return f"runs out in {duration(left)}"


def describe_lease(session_id: str, lease: ReplyLease) -> list[str]:
    """The lines ``dsh unlock`` prints before it asks: the holder and its time left, and
    whether a process on this machine surely is writing under it."""
    lines = [
        f"reply lease on {single_line(session_id)}: held by "
        f"{single_line(lease.holder, HOLDER_CHARS)}, {_timing(lease)}"
    ]
    holder = parse_holder(lease.holder)
    if holder is not None and holder_runs_here(lease.holder):
        lines.append(f"a process on this machine (pid {holder.pid}) is writing it")
    return lines
