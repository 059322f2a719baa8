"""What a rollout's file name and thread name say: the session's id and start time, its
file's time, a bounded title."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from core.jsoncodec import utf8_len
from core.limits import MAX_TITLE_BYTES
from core.timestamps import MAX_EPOCH_MS

_NAME_TIME = re.compile(r"rollout-(\d{4})-(\d{2})-(\d{2})T(\d{2})-(\d{2})-(\d{2})")
_NAME_ID = re.compile(
    r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\.jsonl?"
)


def _bounded_title(name: str) -> str | None:
    """A thread name cut to what a dsh title may hold (``MAX_TITLE_BYTES``)."""
    title = name.strip()
    if not title:
        return None
    while utf8_len(title) > MAX_TITLE_BYTES:
        title = title[: max(len(title) - (utf8_len(title) - MAX_TITLE_BYTES + 3) // 4, 0)]
    return title or None


def _id_from_name(path: Path) -> str:
    """A file without a session meta: the id its name ends with, else the name itself."""
    found = _NAME_ID.search(path.name)
    if found:
        return found.group(1)
    stem = path.name.removesuffix(".zst").removesuffix(".jsonl").removesuffix(".json")
    return stem or path.name


def _time_from_name(path: Path) -> int | None:
    found = _NAME_TIME.match(path.name)
    if not found:
        return None
    y, mo, d, h, mi, s = (int(g) for g in found.groups())
    try:
        return int(datetime(y, mo, d, h, mi, s, tzinfo=UTC).timestamp() * 1000)
    except ValueError:
        return None


def _mtime(path: Path) -> int:
    try:
        return max(0, min(int(path.stat().st_mtime * 1000), MAX_EPOCH_MS))
    except OSError:
        return 0
