"""SPEC §4.3: configuration validation and the error type."""

from __future__ import annotations

import pickle

import pytest

from core.errors import DshError
from core.references import (
    SESSION_REFERENCE_BUDGET_EXCEEDED,
    SESSION_REFERENCE_CANCELLED,
    SESSION_REFERENCE_ERROR_CODES,
    SESSION_REFERENCE_INVALID_CONFIG,
    SESSION_REFERENCE_INVALID_REFERENCE,
    SESSION_REFERENCE_READ_FAILED,
    SESSION_REFERENCE_SELF_REFERENCE,
    SESSION_REFERENCE_TOO_MANY,
    SessionReferenceConfig,
    SessionReferenceError,
)


def test_defaults() -> None:
    config = SessionReferenceConfig()
    assert (config.max_references, config.candidate_limit, config.max_reference_bytes) == (
        3,
        50,
        65536,
    )


def test_codes() -> None:
    codes = {
        SESSION_REFERENCE_INVALID_CONFIG,
        SESSION_REFERENCE_INVALID_REFERENCE,
        SESSION_REFERENCE_SELF_REFERENCE,
        SESSION_REFERENCE_TOO_MANY,
        SESSION_REFERENCE_READ_FAILED,
        SESSION_REFERENCE_BUDGET_EXCEEDED,
        SESSION_REFERENCE_CANCELLED,
    }
    assert codes == SESSION_REFERENCE_ERROR_CODES
    for code in codes:
        assert code.startswith("SESSION_REFERENCE_")
    assert SESSION_REFERENCE_TOO_MANY == "SESSION_REFERENCE_TOO_MANY"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_references": 0},
        {"max_references": 4},
        {"max_references": -1},
        {"max_references": True},
        {"max_references": 2.0},
        {"candidate_limit": 0},
        {"candidate_limit": False},
        {"candidate_limit": "5"},
        {"max_reference_bytes": 0},
        {"max_reference_bytes": None},
        {"max_reference_bytes": 1.5},
    ],
)
def test_invalid_config(kwargs: dict[str, object]) -> None:
    with pytest.raises(SessionReferenceError) as info:
        SessionReferenceConfig(**kwargs)  # type: ignore[arg-type]
    assert info.value.code == SESSION_REFERENCE_INVALID_CONFIG


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_references": 1},
        {"max_references": 3},
        {"candidate_limit": 1},
        {"max_reference_bytes": 1},
    ],
)
def test_valid_config(kwargs: dict[str, int]) -> None:
    SessionReferenceConfig(**kwargs)


def test_config_is_frozen() -> None:
    with pytest.raises(AttributeError):
        SessionReferenceConfig().max_references = 2  # type: ignore[misc]


def test_error_carries_code_and_message() -> None:
    err = SessionReferenceError("boom", SESSION_REFERENCE_TOO_MANY)
    assert err.code == SESSION_REFERENCE_TOO_MANY
    assert str(err) == "boom"
    assert isinstance(err, DshError)
    again = pickle.loads(pickle.dumps(err))
    assert (str(again), again.code) == ("boom", SESSION_REFERENCE_TOO_MANY)
