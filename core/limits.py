"""The sizes a session's header and title may have (issue 30), and how deeply an event's
data may nest (issue 31): every store refuses more on
every write path, and the PostgreSQL team store's tables refuse it too, so that what one
member writes cannot cost another member's listing more than a page.

Sizes are UTF-8 bytes of the text as stores keep it (a lone surrogate counts 3 bytes, as
``surrogatepass`` encodes it). Rows written before these limits, or by hand, are read
within them or reported as damaged (``core.damage``), never loaded whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.errors import InvalidEventError
from core.jsoncodec import utf8_len
from core.jsondepth import nests_deeper

__all__ = [
    "MAX_CWD_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_MARK_EVENT_BYTES",
    "MAX_SESSION_ID_BYTES",
    "MAX_TITLE_BYTES",
    "MAX_TITLE_EVENT_BYTES",
    "check_data_depth",
    "check_header_limits",
    "check_mark_limits",
    "check_title_limits",
    "data_depth_error",
    "title_limit_error",
]

MAX_SESSION_ID_BYTES = 1024
"""A session id: a UUID is 36; ids imported from other tools are of that order."""

MAX_CWD_BYTES = 4096
"""A working directory: Linux's ``PATH_MAX``."""

MAX_TITLE_BYTES = 1024
"""A title (``session/title``'s ``title``): dsh's own are at most 60 characters."""

MAX_TITLE_EVENT_BYTES = 8192
"""The JSON of a whole ``session/title`` event's data (its title, source and any other
field): what a listing reads of one title at most."""

MAX_MARK_EVENT_BYTES = 8192
"""The JSON of a whole ``session/profile``, ``session/fork`` or ``session/source`` event's
data (``core.log.SESSION_MARK_TYPES``): every listing may read the latest of each for
every session (issues 32, 33), so, like a title, one cannot cost the others more than a
page."""

MAX_JSON_DEPTH = 64
"""How deeply an event's data may nest (issue 31): the data object itself is level 1, each
object or array inside it one more. dsh's own events nest fewer than 10 levels; Python's
parsers and encoders recurse once per level, so deeper data is refused on every append and
import, and readers show what lies deeper in older rows as ``…`` (``core.jsondepth``).
The C encoder declines exactly what nests deeper (``core.jsoncodec._C_SAFE_DEPTH``), so what
it wrote needs no scan."""


def _over(what: str, limit: int, size: int) -> InvalidEventError:
    return InvalidEventError(
        f"{what} may hold at most {limit:,} UTF-8 bytes (this one has {size:,})"
    )


def check_header_limits(session_id: str, cwd: str | None) -> None:
    """``InvalidEventError`` naming the limit when a new session's id or cwd is too long."""
    size = utf8_len(session_id)
    if size > MAX_SESSION_ID_BYTES:
        raise _over("a session id", MAX_SESSION_ID_BYTES, size)
    if cwd is not None:
        size = utf8_len(cwd)
        if size > MAX_CWD_BYTES:
            raise _over("a cwd", MAX_CWD_BYTES, size)


def title_limit_error(data: Mapping[str, Any], data_json: str) -> InvalidEventError | None:
    """What is too long in a ``session/title`` event (``data`` as parsed from its JSON text
    ``data_json``), or ``None`` when it fits."""
    title = data.get("title")
    if isinstance(title, str):
        size = utf8_len(title)
        if size > MAX_TITLE_BYTES:
            return _over("a title", MAX_TITLE_BYTES, size)
    size = utf8_len(data_json)
    if size > MAX_TITLE_EVENT_BYTES:
        return _over("a title event's data (as JSON)", MAX_TITLE_EVENT_BYTES, size)
    return None


def check_title_limits(data: Mapping[str, Any], data_json: str) -> None:
    """``title_limit_error`` raised."""
    error = title_limit_error(data, data_json)
    if error is not None:
        raise error


def check_mark_limits(data_json: str) -> None:
    """``InvalidEventError`` when a ``session/profile``, ``session/fork`` or
    ``session/source`` event's data (as its JSON text) is over ``MAX_MARK_EVENT_BYTES``."""
    size = utf8_len(data_json)
    if size > MAX_MARK_EVENT_BYTES:
        raise _over("a profile, fork or source event's data (as JSON)", MAX_MARK_EVENT_BYTES, size)


def check_data_depth(data_json: str) -> None:
    """``InvalidEventError`` when an event's data (as its JSON text) nests deeper than
    ``MAX_JSON_DEPTH`` levels."""
    if nests_deeper(data_json, MAX_JSON_DEPTH):
        raise data_depth_error()


def data_depth_error() -> InvalidEventError:
    """The error of event data nested deeper than ``MAX_JSON_DEPTH`` levels."""
    return InvalidEventError(f"event data nests deeper than {MAX_JSON_DEPTH} levels")
