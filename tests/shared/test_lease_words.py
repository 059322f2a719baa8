"""A reply lease in words (``tui.shared.leases``, what ``dsh unlock`` prints): the holder
escaped, the time left in whole units, and a live writer of this machine named."""

from __future__ import annotations

import os

from core.leases import MAX_LEASE_TTL_MS, ReplyLease, lease_owner
from tui.shared.leases import describe_lease, duration


def test_durations_in_whole_units_rounded_up() -> None:
    assert [duration(ms) for ms in (0, 1, 999, 1000, 25_000, 119_000, 119_001)] == [
        "0 s",
        "1 s",
        "1 s",
        "1 s",
        "25 s",
        "119 s",
        "2 min",
    ]
    assert duration(MAX_LEASE_TTL_MS) == "10 min"
    assert duration(3 * 3_600_000) == "3 h"
    assert duration(5 * 86_400_000) == "5 d"
    assert duration(-5) == "0 s"


def test_a_lease_that_runs_out_ran_out_or_runs_out_implausibly_late() -> None:
    holder = "box:0123456789abcdef:4242:x"
    assert describe_lease("s", ReplyLease(holder, 25_000)) == [
        f"reply lease on s: held by {holder}, runs out in 25 s"
    ]
    assert describe_lease("s", ReplyLease(holder, -3_000)) == [
        f"reply lease on s: held by {holder}, ran out 3 s ago: it blocks nothing"
    ]
    assert describe_lease("s", ReplyLease(holder, 2 * 86_400_000)) == [
        f"reply lease on s: held by {holder}, runs out in 2 d, implausibly late: "
        "it counts as run out"
    ]


def test_hostile_holders_and_ids_are_escaped() -> None:
    (line,) = describe_lease("\u202eid", ReplyLease("\x1b]0;pwned\x07\nx" + "y" * 500, 1_000))
    assert line.startswith("reply lease on \\u202eid: held by \\x1b]0;pwned\\x07\\nxyyy")
    assert "\x1b" not in line and "\n" not in line and len(line) < 260


def test_a_live_writer_of_this_machine_is_named() -> None:
    mine = lease_owner()
    assert describe_lease("s", ReplyLease(mine, 30_000)) == [
        f"reply lease on s: held by {mine}, runs out in 30 s",
        f"a process on this machine (pid {os.getpid()}) is writing it",
    ]
