"""A rollout record's fields read and checked (``_Bad`` when one is of the wrong type),
its times, and the words of a line that cannot be read."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from core.importers.foreign import json_kind
from core.logfile import LogImportError
from core.timestamps import MAX_EPOCH_MS

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def _message(err: LogImportError) -> str:
    text = str(err)
    prefix = f"line {err.line}: "
    return text[len(prefix) :] if err.line and text.startswith(prefix) else text


def _is_bare_meta(obj: Mapping[str, Any]) -> bool:
    return (
        isinstance(obj.get("id"), str)
        and isinstance(obj.get("timestamp"), str)
        and "record_type" not in obj
        and "role" not in obj
    )


def _time(value: object) -> int | None:
    """Epoch ms of an ISO 8601 timestamp; ``None`` for anything else (a placeholder)."""
    if not isinstance(value, str) or not 10 <= len(value) <= 64:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    ms = (moment - _EPOCH) // _MS  # exact: no float on the way
    return ms if 0 <= ms <= MAX_EPOCH_MS else None


class _Bad(Exception):
    """A line that is not what Codex writes (its message names what)."""


def _expect(value: object, kind: type | tuple[type, ...], what: str) -> Any:
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise _Bad(f"{what} must be {_article(names)}, got {json_kind(value)}")
    return value


def _article(names: str) -> str:
    words = {"str": "a string", "dict": "an object", "list": "a list", "NoneType": "null"}
    return " or ".join(words.get(n, n) for n in names.split(" or "))


def _optional_str(payload: Mapping[str, Any], key: str, what: str) -> str | None:
    value = payload.get(key)
    if value is None:
        return None
    return str(_expect(value, str, what))
