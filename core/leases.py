"""Reply leases (one reply or compaction at a time per session, across processes): the
rule every store applies to a lease it finds, so that they all judge one the same way.

A lease is ``(holder, expires_at)``; its holder renews it while it works (a heartbeat),
and a store judges it by its own clock: on PostgreSQL the server's, so a client whose
clock runs fast can neither make its lease outlive it nor see others' as expired.

A holder names its process (``lease_owner``): the host, the PID namespace it runs in, its
pid and a nonce. A holder is judged dead by its pid only by a process in that same
namespace (``lease_owner_is_dead``): containers that share a host name see other pids.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "MAX_LEASE_TTL_MS",
    "LeaseHolder",
    "ReplyLease",
    "check_lease_ttl",
    "holder_runs_here",
    "lease_blocks",
    "lease_owner",
    "lease_owner_is_dead",
    "namespace_identity",
    "parse_holder",
]

MAX_LEASE_TTL_MS = 10 * 60_000
"""The longest a lease may run without renewal. A lease found to run out later than this
from now (written by a clock that was ahead, or by hand) counts as expired: nothing but
its own expiry could break it otherwise."""


@dataclass(frozen=True, slots=True)
class ReplyLease:
    """The lease a session's owner sees (``SessionStore.read_reply_lease``): who holds it
    (a holder string of ``lease_owner``'s form, or whatever an older dsh wrote)
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


# --------------------------------------------------------------------------- holders

UNKNOWN_NAMESPACE = "-"
"""The namespace field of a holder whose process could not read its own identity: such a
holder is never judged dead by its pid (its lease runs out by its TTL)."""

_BOOT_ID = "/proc/sys/kernel/random/boot_id"
_PID_NAMESPACE = "/proc/self/ns/pid"
_MACHINE_IDS = ("/etc/machine-id", "/var/lib/dbus/machine-id")
_IDENTITY = re.compile(r"[0-9a-f]{16}")


def _read_line(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as file:
            return file.read(256).strip() or None
    except OSError:
        return None


def namespace_identity() -> str | None:
    """What tells this process's PID namespace from every other one, on any machine: a
    digest of the kernel's boot id, the namespace's inode and the machine id (when
    readable). ``None`` when the boot id or the namespace cannot be read (not Linux, no
    ``/proc``): then no holder is judged dead by its pid."""
    boot = _read_line(_BOOT_ID)
    try:
        namespace = os.stat(_PID_NAMESPACE)
    except OSError:
        return None
    if boot is None:
        return None
    machine = next((m for m in map(_read_line, _MACHINE_IDS) if m is not None), "")
    seed = f"{boot}\n{namespace.st_dev}:{namespace.st_ino}\n{machine}"
    return hashlib.sha256(seed.encode("ascii", "replace")).hexdigest()[:16]


def lease_owner() -> str:
    """A reply lease holder: ``host:namespace:pid:nonce`` (unique per reply, and naming its
    process so that one on the same host and in the same PID namespace can tell it died)."""
    namespace = namespace_identity() or UNKNOWN_NAMESPACE
    return f"{socket.gethostname()}:{namespace}:{os.getpid()}:{uuid.uuid4().hex}"


@dataclass(frozen=True, slots=True)
class LeaseHolder:
    """A holder string of ``lease_owner``'s form, taken apart (``parse_holder``)."""

    host: str
    namespace: str  # 16 hex digits, or UNKNOWN_NAMESPACE
    pid: int
    nonce: str

    @property
    def here(self) -> bool:
        """On this host and in this process's PID namespace: its pid means ours."""
        mine = namespace_identity()
        return mine is not None and self.namespace == mine and self.host == socket.gethostname()


def parse_holder(holder: str) -> LeaseHolder | None:
    """``holder`` taken apart, or ``None`` for anything else (an older dsh's ``host:pid:nonce``,
    a hand-written or damaged string). The host may hold colons; the last three fields not."""
    parts = holder.rsplit(":", 3)
    if len(parts) != 4:
        return None
    host, namespace, pid, nonce = parts
    if namespace != UNKNOWN_NAMESPACE and not _IDENTITY.fullmatch(namespace):
        return None
    if not (pid.isascii() and pid.isdigit()) or len(pid) > 10 or not 0 < int(pid) < 2**31:
        return None
    return LeaseHolder(host, namespace, int(pid), nonce)


def _pid_runs(pid: int) -> bool | None:
    """Whether ``pid`` names a running process of this namespace (``None``: cannot tell)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    except OSError:
        return None
    return True


def lease_owner_is_dead(owner: str) -> bool:
    """True when ``owner`` names a process of this host and PID namespace that no longer
    exists (killed mid-reply): its lease need not run out first. Anything unsure (an older
    format, another namespace, an unreadable identity) counts as alive."""
    holder = parse_holder(owner)
    if holder is None or holder.pid == os.getpid() or not holder.here:
        return False
    return _pid_runs(holder.pid) is False


def holder_runs_here(owner: str) -> bool:
    """True when ``owner`` names a process of this host and PID namespace that still runs:
    someone is surely writing (``dsh unlock`` says so; the busy error needs no hint)."""
    holder = parse_holder(owner)
    return holder is not None and holder.here and _pid_runs(holder.pid) is True
