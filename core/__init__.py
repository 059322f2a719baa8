"""dsh's domain: the session log, folding, titles, compaction and session references.

Everything the SPEC names as public is importable from here (``from core import …``).


The names load their module when first asked for, so that importing one module of the
package (``core.config`` for a command's start) does not load the others."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.lazy import lazy_names
from core.references import _HOMES as _REFERENCE_HOMES
from core.references import __all__ as _references_all

if TYPE_CHECKING:
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
    from core.query import (
        SessionQueryLike,
        SessionTitle,
        SurfaceSnapshot,
    )
    from core.references import *  # noqa: F403 - the session-reference API is ours to re-export
    from core.sharing import (
        Share,
    )
    from core.store import (
        SessionStore,
    )
    from core.surface import (
        SurfaceFolder,
        fold_surface,
    )

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

_HOMES = {
    "DshError": "core.errors",
    "InvalidEventError": "core.errors",
    "SessionBusyError": "core.errors",
    "SessionExistsError": "core.errors",
    "SessionNotFoundError": "core.errors",
    "SessionReadOnlyError": "core.errors",
    "ShareError": "core.errors",
    "StoreError": "core.errors",
    "StoreUnreachableError": "core.errors",
    "COMPACT_CHECKPOINT_SOURCE": "core.log",
    "SURFACE_EVENT_TYPES": "core.log",
    "Event": "core.log",
    "NewEvent": "core.log",
    "Replace": "core.log",
    "SessionHeader": "core.log",
    "SurfaceOp": "core.log",
    "assistant_message": "core.log",
    "is_compact_checkpoint_source": "core.log",
    "message_text": "core.log",
    "reasoning_block": "core.log",
    "text_block": "core.log",
    "tool_call_block": "core.log",
    "tool_result_block": "core.log",
    "user_message": "core.log",
    "SessionQueryLike": "core.query",
    "SessionTitle": "core.query",
    "SurfaceSnapshot": "core.query",
    "Share": "core.sharing",
    "SessionStore": "core.store",
    "SurfaceFolder": "core.surface",
    "fold_surface": "core.surface",
    **_REFERENCE_HOMES,
}
"""The module each exported name lives in."""


__getattr__ = lazy_names(__name__, _HOMES)
