"""The one rule for a stored timestamp (a header's ``created_at``, an event's ``time``).

Every store, ``dsh import`` and ``dsh replay`` accept the SPEC's epoch milliseconds from 0
(1970) to ``MAX_EPOCH_MS``, the last millisecond of year 9999 (the end of what a date can
show), whatever the clock says (issue 31): a log written on a machine whose clock ran
ahead is kept as it is, for nothing may be lost for a clock. Such a time is shown as its
date (``core.display.relative_age``), never as a negative age.
"""

from __future__ import annotations

from core.errors import InvalidEventError

__all__ = ["MAX_EPOCH_MS", "check_epoch_ms"]

MAX_EPOCH_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


def _shown(value: object) -> str:
    if isinstance(value, int) and value.bit_length() > 128:  # str() of huge ints is slow
        return f"a {value.bit_length()}-bit integer"
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def check_epoch_ms(value: object, what: str) -> int:
    """``value`` if it is an int of epoch milliseconds in the accepted range, else
    ``InvalidEventError`` naming ``what`` (e.g. ``"created_at"``, ``"event time"``)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidEventError(f"{what} must be integer epoch milliseconds, got {_shown(value)}")
    if value < 0 or value > MAX_EPOCH_MS:
        raise InvalidEventError(
            f"{what} {_shown(value)} is out of range (epoch milliseconds, 0 to {MAX_EPOCH_MS})"
        )
    return value
