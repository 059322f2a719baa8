"""The one place times are formatted for people and clients (no Rich, no Textual).

Every formatter takes epoch milliseconds and never raises: a time no calendar date can
show (a hostile or corrupt log) becomes ``"?"`` (or ``None`` for a client field).
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["UNKNOWN_TIME", "iso_time", "local_minute", "local_zone", "utc_minute"]

UNKNOWN_TIME = "?"
"""What a time no calendar date can show is printed as."""


def _moment(epoch_ms: int, tz: object = None) -> datetime | None:
    try:
        return datetime.fromtimestamp(epoch_ms / 1000, tz)  # type: ignore[arg-type]
    except (OverflowError, OSError, ValueError, TypeError):
        return None


def local_minute(epoch_ms: int) -> str:
    """``2025-11-24 16:00`` in the local time zone (the transcript, ``dsh show``)."""
    moment = _moment(epoch_ms)
    return UNKNOWN_TIME if moment is None else moment.strftime("%Y-%m-%d %H:%M")


def local_zone() -> str:
    """The local time zone as an offset from UTC now, ``UTC+01:00`` (says what
    ``local_minute`` times are, in a file read elsewhere)."""
    offset = datetime.now().astimezone().utcoffset()
    minutes = int(offset.total_seconds() // 60) if offset is not None else 0
    sign = "+" if minutes >= 0 else "-"
    return f"UTC{sign}{abs(minutes) // 60:02}:{abs(minutes) % 60:02}"


def utc_minute(epoch_ms: int) -> str:
    """``2025-11-24 16:00 UTC`` (an export read elsewhere says its zone)."""
    moment = _moment(epoch_ms, UTC)
    return UNKNOWN_TIME if moment is None else moment.strftime("%Y-%m-%d %H:%M UTC")


def iso_time(epoch_ms: int) -> str | None:
    """``2026-11-30T23:19:20.123Z`` (ACP ``updatedAt``); ``None`` when no date can show it."""
    moment = _moment(epoch_ms, UTC)
    if moment is None:
        return None
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
