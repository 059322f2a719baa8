"""What the engine yields and raises: a prepared draft, the updates of a send (stored
batch, deltas, waits, the finished reply, a new title), the engine's errors and a
compaction's result."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from core.errors import DshError, StoreError
from core.log import USER_MESSAGE, Event, NewEvent
from core.providers.base import ProviderError
from core.references import SessionReferenceInput
from core.secrets import redact


@dataclass(frozen=True, slots=True)
class PreparedDraft:
    """A parsed and prepared draft, ready to append (or to preview)."""

    readable_text: str
    references: tuple[SessionReferenceInput, ...]
    snapshot: Mapping[str, Any] | None
    message: Mapping[str, Any]

    @property
    def batch(self) -> list[NewEvent]:
        events = [] if self.snapshot is None else [NewEvent(USER_MESSAGE, self.snapshot, "append")]
        events.append(NewEvent(USER_MESSAGE, self.message, "append"))
        return events


@dataclass(frozen=True, slots=True)
class Submitted:
    """The user's batch is stored: the snapshot (if any) and the direct message."""

    events: tuple[Event, ...]


@dataclass(frozen=True, slots=True)
class ReplyDelta:
    kind: Literal["text", "reasoning"]
    text: str


@dataclass(frozen=True, slots=True)
class ReplyFinished:
    """The reply is stored. ``status`` is completed, interrupted or error."""

    status: Literal["completed", "interrupted", "error"]
    message_event: Event | None
    error: ProviderError | None = None
    first_delta_seconds: float | None = None
    store_error: StoreError | None = None
    """The server went away during the reply: it ended there (status ``error``, unless
    only its final write was delayed) and was stored once the server was back."""


@dataclass(frozen=True, slots=True)
class ReplyWaiting:
    """The provider waits ``seconds`` before retrying, because of ``reason`` (one line)."""

    seconds: float
    reason: str

    @property
    def seconds_text(self) -> str:
        """``30 s``, ``0.5 s``: the wait as a user reads it."""
        return f"{self.seconds:.0f} s" if self.seconds >= 9.95 else f"{self.seconds:.2g} s"


@dataclass(frozen=True, slots=True)
class TitleChanged:
    title: str
    event: Event


EngineUpdate = Submitted | ReplyDelta | ReplyWaiting | ReplyFinished | TitleChanged


def provider_failure(err: BaseException) -> ProviderError:
    """Any exception from a provider as a ``ProviderError`` a user can read (secrets redacted).

    The engine's safety net: a provider should raise only ``ProviderError``, but a bug or a
    surprise below it must end the reply cleanly, never as a traceback.
    """
    if isinstance(err, ProviderError):
        return err
    detail = " ".join(redact(str(err)).split()) or "no details"
    if len(detail) > 300:
        detail = detail[:299] + "…"
    return ProviderError(f"the model client failed: {type(err).__name__}: {detail}", "protocol")


class MissingKeyError(DshError):
    """The chat's profile needs an API key that is not set; nothing was stored."""


class NothingToAnswerError(DshError):
    """``reply_to_last`` found no unanswered user message at the end of the session."""


class CompactionError(DshError):
    """Compaction was not possible (nothing to compact, the session changed meanwhile) or
    its summary failed. Nothing of a compaction that raised it is left half-written."""


COMPACTION_RACE_MESSAGE = "the session changed while compacting; nothing compacted"


@dataclass(frozen=True, slots=True)
class CompactionResult:
    checkpoint: Event
    shadowed: tuple[int, ...]
    summary: str
