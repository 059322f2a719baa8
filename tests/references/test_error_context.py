"""Errors about one source name it (``session_id``), so hosts can show its label."""

from __future__ import annotations

import pickle

import pytest

from core.log import USER_MESSAGE, user_message
from core.references import (
    SESSION_REFERENCE_BUDGET_EXCEEDED,
    SESSION_REFERENCE_READ_FAILED,
    SessionReferenceConfig,
    SessionReferenceError,
    SessionReferenceInput,
    SessionReferenceService,
)
from stores import SessionQuery, SessionStore


async def test_read_failed_and_budget_errors_name_the_source(store: SessionStore) -> None:
    target = await store.create_session("t")
    await store.create_session("big")
    await store.append("big", USER_MESSAGE, user_message("x" * 500), surface_op="append")
    service = SessionReferenceService(
        SessionQuery(store), SessionReferenceConfig(max_reference_bytes=100)
    )
    with pytest.raises(SessionReferenceError) as info:
        await service.prepare(
            target, [], [SessionReferenceInput("big", "B"), SessionReferenceInput("gone", "G")]
        )
    assert info.value.code == SESSION_REFERENCE_READ_FAILED and info.value.session_id == "gone"
    with pytest.raises(SessionReferenceError) as info:
        await service.prepare(target, [], [SessionReferenceInput("big", "B")])
    assert info.value.code == SESSION_REFERENCE_BUDGET_EXCEEDED and info.value.session_id == "big"
    copy = pickle.loads(pickle.dumps(info.value))
    assert (copy.code, copy.session_id, str(copy)) == (info.value.code, "big", str(info.value))
