"""dsh's domain: the session log, folding, titles, compaction and session references.

Everything the SPEC names as public is importable from here (``from core import …``).
"""

from core.errors import (
    DshError,
    InvalidEventError,
    SessionBusyError,
    SessionExistsError,
    SessionNotFoundError,
    SessionReadOnlyError,
    ShareError,
    StoreError,
    StoreUnreachableError,
)
from core.log import (
    COMPACT_CHECKPOINT_SOURCE,
    SURFACE_EVENT_TYPES,
    Event,
    NewEvent,
    Replace,
    SessionHeader,
    SurfaceOp,
    assistant_message,
    is_compact_checkpoint_source,
    message_text,
    reasoning_block,
    text_block,
    tool_call_block,
    tool_result_block,
    user_message,
)
from core.query import SessionQueryLike, SessionTitle, SurfaceSnapshot
from core.references import *  # noqa: F403 - the session-reference API is ours to re-export
from core.references import __all__ as _references_all
from core.sharing import Share
from core.store import SessionStore
from core.surface import SurfaceFolder, fold_surface

__all__ = [
    "COMPACT_CHECKPOINT_SOURCE",
    "SURFACE_EVENT_TYPES",
    "DshError",
    "Event",
    "InvalidEventError",
    "NewEvent",
    "Replace",
    "SessionBusyError",
    "SessionExistsError",
    "SessionHeader",
    "SessionNotFoundError",
    "SessionReadOnlyError",
    "SessionQueryLike",
    "SessionStore",
    "SessionTitle",
    "Share",
    "ShareError",
    "StoreError",
    "StoreUnreachableError",
    "SurfaceFolder",
    "SurfaceOp",
    "SurfaceSnapshot",
    "assistant_message",
    "fold_surface",
    "is_compact_checkpoint_source",
    "message_text",
    "reasoning_block",
    "text_block",
    "tool_call_block",
    "tool_result_block",
    "user_message",
    *_references_all,
]
