"""Reply leases (one reply or compaction at a time per session, across processes): the
rule every store applies to a lease it finds, so that they all judge one the same way.

A lease is ``(holder, expires_at)``; its holder renews it while it works (a heartbeat),
and a store judges it by its own clock: on PostgreSQL the server's, so a client whose
clock runs fast can neither make its lease outlive it nor see others' as expired.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["MAX_LEASE_TTL_MS", "ReplyLease", "check_lease_ttl", "lease_blocks"]

MAX_LEASE_TTL_MS = 10 * 60_000
"""The longest a lease may run without renewal. A lease found to run out later than this
from now (written by a clock that was ahead, or by hand) counts as expired: nothing but
its own expiry could break it otherwise."""


@dataclass(frozen=True, slots=True)
class ReplyLease:
    """The lease a session's owner sees (``SessionStore.read_reply_lease``): who holds it
    (a holder string of ``core.engine.lease_owner``'s form, or whatever an older dsh wrote)
    and how long until it runs out by the store's clock (negative: it has run out)."""

    holder: str
    expires_in_ms: int

    @property
    def live(self) -> bool:
        return 0 < self.expires_in_ms <= MAX_LEASE_TTL_MS


def check_lease_ttl(ttl_ms: object) -> int:
    """A lease duration: an int from 0 (runs out at once) to ``MAX_LEASE_TTL_MS`` (else
    ``ValueError``)."""
    if (
        isinstance(ttl_ms, bool)
        or not isinstance(ttl_ms, int)
        or not 0 <= ttl_ms <= MAX_LEASE_TTL_MS
    ):
        raise ValueError(f"ttl_ms must be an int in 0..{MAX_LEASE_TTL_MS}, not {ttl_ms!r}")
    return ttl_ms


def lease_blocks(
    held_by: str,
    expires_at: int,
    taker: str,
    now: int,
    dead: Callable[[str], bool] | None = None,
) -> bool:
    """Whether a lease held by ``held_by`` until ``expires_at`` keeps ``taker`` from taking
    the session's lease at ``now`` (both by the store's clock): only another holder's lease
    that has not run out, does not run out implausibly late (beyond ``MAX_LEASE_TTL_MS``),
    and whose holder ``dead`` does not know to be gone."""
    if held_by == taker or expires_at <= now or expires_at > now + MAX_LEASE_TTL_MS:
        return False
    return not (dead is not None and dead(held_by))
