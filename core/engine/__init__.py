"""The chat engine: sends a draft, streams the reply, names and compacts sessions.

One ``ChatSession`` per open session. A send is two durable steps: the user's batch
(referenced-sessions snapshot, then the direct message — SPEC §5) and the reply (buffered
``assistant/chunk`` events, then one ``assistant/message`` and a ``turn/end``). Whatever
happens to the reply, the user's message is already safe.

The package holds one concern per module: ``context`` (what the model receives),
``updates`` (what the engine yields and raises), ``chunks`` (batched chunk writes),
``waits`` (waits cut short), ``state`` (the session's state and its reads of the log),
``leasing`` (the reply lease), ``replying`` (a reply), ``compaction`` and ``session``
(``ChatSession``, the entry points). Everything is importable from here, as before.
"""

from core.engine.chunks import CHUNK_FLUSH_EVENTS as CHUNK_FLUSH_EVENTS
from core.engine.chunks import CHUNK_FLUSH_SECONDS as CHUNK_FLUSH_SECONDS
from core.engine.chunks import chunk_flush_seconds
from core.engine.context import SUMMARY_PROMPT as SUMMARY_PROMPT
from core.engine.context import (
    SYSTEM_PROMPT,
    fallback_title,
    provider_messages,
    summarize,
    unanswered_message,
)
from core.engine.context import TITLE_MAX_CHARS as TITLE_MAX_CHARS
from core.engine.session import ChatSession
from core.engine.state import REPLY_LEASE_RENEW_SECONDS as REPLY_LEASE_RENEW_SECONDS
from core.engine.state import REPLY_LEASE_TTL_MS as REPLY_LEASE_TTL_MS
from core.engine.state import STORE_RETRY_FIRST_DELAY as STORE_RETRY_FIRST_DELAY
from core.engine.state import STORE_RETRY_MAX_DELAY as STORE_RETRY_MAX_DELAY
from core.engine.state import STORE_RETRY_SECONDS as STORE_RETRY_SECONDS
from core.engine.updates import (
    COMPACTION_RACE_MESSAGE,
    CompactionError,
    CompactionResult,
    EngineUpdate,
    MissingKeyError,
    NothingToAnswerError,
    PreparedDraft,
    ReplyDelta,
    ReplyFinished,
    ReplyWaiting,
    Submitted,
    TitleChanged,
)
from core.engine.updates import provider_failure as provider_failure
from core.leases import lease_owner as lease_owner  # importable from here as before
from core.leases import lease_owner_is_dead as lease_owner_is_dead

__all__ = [
    "COMPACTION_RACE_MESSAGE",
    "SYSTEM_PROMPT",
    "ChatSession",
    "CompactionError",
    "CompactionResult",
    "EngineUpdate",
    "MissingKeyError",
    "NothingToAnswerError",
    "PreparedDraft",
    "ReplyDelta",
    "ReplyFinished",
    "ReplyWaiting",
    "Submitted",
    "TitleChanged",
    "chunk_flush_seconds",
    "fallback_title",
    "provider_messages",
    "summarize",
    "unanswered_message",
]
