"""The one order of session listings in every front end (the app's sidebar, ``dsh
sessions``): by last activity, newest first. A session's last activity is the time of its
last event, or its creation when it has none; ties go to the newer creation, then by id."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from core.log import SessionHeader

__all__ = ["active_at", "by_last_activity", "order_by_last_activity"]

T = TypeVar("T")


def active_at(header: SessionHeader, last_event_time: int | None) -> int:
    """When the session was last used: its last event, or its creation."""
    return last_event_time if last_event_time is not None else header.created_at


def order_by_last_activity(
    items: Iterable[T],
    header: Callable[[T], SessionHeader],
    last_event_time: Callable[[T], int | None],
) -> list[T]:
    """``items`` (each naming a session) newest activity first; ties by newest creation,
    then by id (code-point order)."""
    ordered = sorted(items, key=lambda item: header(item).id)
    ordered.sort(
        key=lambda item: (
            active_at(header(item), last_event_time(item)),
            header(item).created_at,
        ),
        reverse=True,
    )
    return ordered


def by_last_activity(
    headers: Iterable[SessionHeader], last_event_times: Mapping[str, int]
) -> list[SessionHeader]:
    """``headers`` in the listings' order, given each session's last event time
    (``SessionQuery.read_last_event_times``; absent: no events)."""
    return order_by_last_activity(headers, lambda h: h, lambda h: last_event_times.get(h.id))
