"""The one rule for a stored timestamp (a header's ``created_at``, an event's ``time``).

Lists are ordered by these (newest first), so a value far in the future pins its session on
top forever (``created_at = 2**63-1`` did). Every store and ``dsh import`` accept epoch
milliseconds from 0 (1970) to at most one day past the current clock: a day absorbs clock
skew between machines and time-zone mistakes, and nothing can stay on top for longer.
``MAX_EPOCH_MS`` (the last millisecond of year 9999, the end of what a date can show) bounds
it whatever the clock says.
"""

from __future__ import annotations

import time

from core.errors import InvalidEventError

__all__ = ["FUTURE_SLACK_MS", "MAX_EPOCH_MS", "check_epoch_ms", "latest_epoch_ms"]

MAX_EPOCH_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
FUTURE_SLACK_MS = 86_400_000  # one day


def _shown(value: object) -> str:
    if isinstance(value, int) and value.bit_length() > 128:  # str() of huge ints is slow
        return f"a {value.bit_length()}-bit integer"
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def latest_epoch_ms(now_ms: int | None = None) -> int:
    """The latest timestamp ``check_epoch_ms`` accepts when the clock says ``now_ms``
    (the system clock when ``None``)."""
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    return min(MAX_EPOCH_MS, now + FUTURE_SLACK_MS)


def check_epoch_ms(value: object, what: str, *, now_ms: int | None = None) -> int:
    """``value`` if it is an int of epoch milliseconds in the accepted range, else
    ``InvalidEventError`` naming ``what`` (e.g. ``"created_at"``, ``"event time"``)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidEventError(f"{what} must be integer epoch milliseconds, got {_shown(value)}")
    if value < 0 or value > MAX_EPOCH_MS:
        raise InvalidEventError(
            f"{what} {_shown(value)} is out of range (epoch milliseconds, 0 to {MAX_EPOCH_MS})"
        )
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    if value > latest_epoch_ms(now):
        raise InvalidEventError(
            f"{what} {value} is more than a day in the future (the clock says {now})"
        )
    return value
