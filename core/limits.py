"""The sizes a session's header and title may have (issue 30): every store refuses more on
every write path, and the PostgreSQL team store's tables refuse it too, so that what one
member writes cannot cost another member's listing more than a page.

Sizes are UTF-8 bytes of the text as stores keep it (a lone surrogate counts 3 bytes, as
``surrogatepass`` encodes it). Rows written before these limits, or by hand, are read
within them or reported as damaged (``core.damage``), never loaded whole.
"""

from __future__ import annotations

__all__ = [
    "MAX_CWD_BYTES",
    "MAX_SESSION_ID_BYTES",
    "MAX_TITLE_BYTES",
    "MAX_TITLE_EVENT_BYTES",
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
