"""Session-reference configuration and the one error type the feature raises (SPEC §4.3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from core.errors import DshError

__all__ = [
    "MAX_SESSION_REFERENCES",
    "SESSION_REFERENCE_BUDGET_EXCEEDED",
    "SESSION_REFERENCE_CANCELLED",
    "SESSION_REFERENCE_ERROR_CODES",
    "SESSION_REFERENCE_INVALID_CONFIG",
    "SESSION_REFERENCE_INVALID_REFERENCE",
    "SESSION_REFERENCE_READ_FAILED",
    "SESSION_REFERENCE_SELF_REFERENCE",
    "SESSION_REFERENCE_TOO_MANY",
    "SessionReferenceConfig",
    "SessionReferenceError",
]

SESSION_REFERENCE_INVALID_CONFIG: Final = "SESSION_REFERENCE_INVALID_CONFIG"
SESSION_REFERENCE_INVALID_REFERENCE: Final = "SESSION_REFERENCE_INVALID_REFERENCE"
SESSION_REFERENCE_SELF_REFERENCE: Final = "SESSION_REFERENCE_SELF_REFERENCE"
SESSION_REFERENCE_TOO_MANY: Final = "SESSION_REFERENCE_TOO_MANY"
SESSION_REFERENCE_READ_FAILED: Final = "SESSION_REFERENCE_READ_FAILED"
SESSION_REFERENCE_BUDGET_EXCEEDED: Final = "SESSION_REFERENCE_BUDGET_EXCEEDED"
SESSION_REFERENCE_CANCELLED: Final = "SESSION_REFERENCE_CANCELLED"

SESSION_REFERENCE_ERROR_CODES: Final[frozenset[str]] = frozenset(
    {
        SESSION_REFERENCE_INVALID_CONFIG,
        SESSION_REFERENCE_INVALID_REFERENCE,
        SESSION_REFERENCE_SELF_REFERENCE,
        SESSION_REFERENCE_TOO_MANY,
        SESSION_REFERENCE_READ_FAILED,
        SESSION_REFERENCE_BUDGET_EXCEEDED,
        SESSION_REFERENCE_CANCELLED,
    }
)

MAX_SESSION_REFERENCES: Final = 3
"""The hard ceiling on ``max_references``: one message may reference at most three sessions."""


class SessionReferenceError(DshError):
    """Any failure of the session-reference feature; ``code`` says which (a ``SESSION_REFERENCE_*``)."""

    def __init__(self, message: str, code: str, *, session_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.session_id = session_id  # the source concerned, when there is one

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_error, (type(self), self.message, self.code, self.session_id))

    def __repr__(self) -> str:
        return f"SessionReferenceError({self.message!r}, {self.code!r})"


def _rebuild_error(
    cls: type[SessionReferenceError], message: str, code: str, session_id: str | None
) -> SessionReferenceError:
    return cls(message, code, session_id=session_id)


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


@dataclass(frozen=True, slots=True)
class SessionReferenceConfig:
    """Limits of the feature, validated at construction (bad values → ``INVALID_CONFIG``)."""

    max_references: int = MAX_SESSION_REFERENCES
    candidate_limit: int = 50
    max_reference_bytes: int = 65536

    def __post_init__(self) -> None:
        for name in ("max_references", "candidate_limit", "max_reference_bytes"):
            value = getattr(self, name)
            if not _positive_int(value):
                raise SessionReferenceError(
                    f"{name} must be a positive int, got {value!r}",
                    SESSION_REFERENCE_INVALID_CONFIG,
                )
        if self.max_references > MAX_SESSION_REFERENCES:
            raise SessionReferenceError(
                f"max_references must be at most {MAX_SESSION_REFERENCES}, "
                f"got {self.max_references}",
                SESSION_REFERENCE_INVALID_CONFIG,
            )
