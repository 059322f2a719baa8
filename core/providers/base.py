"""The ``ModelProvider`` seam: what the chat engine needs from a model."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from core.errors import DshError

__all__ = [
    "Finish",
    "ModelProvider",
    "ProviderError",
    "ProviderMessage",
    "ReasoningDelta",
    "StreamEvent",
    "TextDelta",
    "Usage",
    "Waiting",
]


@dataclass(frozen=True, slots=True)
class ProviderMessage:
    """One message as the model receives it (plain text; no tools in this app)."""

    role: Literal["system", "user", "assistant"]
    text: str


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True, slots=True)
class Usage:
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Finish:
    reason: str = "stop"


@dataclass(frozen=True, slots=True)
class Waiting:
    """Nothing arrives for ``seconds`` on purpose (a retry after ``reason``): say so."""

    seconds: float
    reason: str


StreamEvent = TextDelta | ReasoningDelta | Usage | Finish | Waiting

ProviderErrorKind = Literal[
    "missing_key",
    "auth",
    "not_found",
    "rate_limited",
    "server",
    "network",
    "timeout",
    "protocol",
    "bad_request",
]


class ProviderError(DshError):
    """The model could not answer; ``kind`` says why in a way a UI can explain."""

    def __init__(self, message: str, kind: ProviderErrorKind, *, status: int | None = None) -> None:
        super().__init__(message)
        self.kind: ProviderErrorKind = kind
        self.status = status


@runtime_checkable
class ModelProvider(Protocol):
    """Streams a reply to a conversation. ``name``/``model`` end up in message sources."""

    name: str
    model: str

    def stream(
        self, messages: Sequence[ProviderMessage], *, cancel: asyncio.Event | None = None
    ) -> AsyncIterator[StreamEvent]:
        """Yield deltas until the reply is complete; raise ``ProviderError`` on failure."""
        ...

    async def aclose(self) -> None: ...
