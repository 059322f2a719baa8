"""One wording for every error, used by the app, the CLI and the ACP agent (tui/shared/errors)."""

from __future__ import annotations

import errno

import pytest

from core.errors import (
    DiskFullError,
    InvalidEventError,
    LeaseLostError,
    SessionBusyError,
    SessionNotFoundError,
    StoreError,
)
from core.references.config import (
    SESSION_REFERENCE_BUDGET_EXCEEDED,
    SESSION_REFERENCE_CANCELLED,
    SESSION_REFERENCE_INVALID_CONFIG,
    SESSION_REFERENCE_INVALID_REFERENCE,
    SESSION_REFERENCE_READ_FAILED,
    SESSION_REFERENCE_SELF_REFERENCE,
    SESSION_REFERENCE_TOO_MANY,
    SessionReferenceError,
)
from tui.shared.errors import REFERENCE_ERROR_WORDS, describe_error, fault_message, sentence

ALL_CODES = [
    SESSION_REFERENCE_SELF_REFERENCE,
    SESSION_REFERENCE_TOO_MANY,
    SESSION_REFERENCE_READ_FAILED,
    SESSION_REFERENCE_BUDGET_EXCEEDED,
    SESSION_REFERENCE_INVALID_REFERENCE,
    SESSION_REFERENCE_CANCELLED,
    SESSION_REFERENCE_INVALID_CONFIG,
]


def test_every_reference_code_has_its_own_words() -> None:
    assert set(REFERENCE_ERROR_WORDS) == set(ALL_CODES)
    assert len(set(REFERENCE_ERROR_WORDS.values())) == len(ALL_CODES)
    for code in ALL_CODES:
        words = describe_error(SessionReferenceError("core detail", code))
        assert words.startswith(REFERENCE_ERROR_WORDS[code]), code
        assert "SessionReferenceError(" not in words


def test_a_deleted_source_is_named_and_never_a_repr() -> None:
    err = SessionReferenceError("x", SESSION_REFERENCE_READ_FAILED, session_id="demo-notes")
    err.__cause__ = SessionNotFoundError("demo-notes")
    assert describe_error(err) == (
        "the referenced session 'demo-notes' does not exist (was it deleted?)"
    )
    assert describe_error(err, name_of=lambda sid: f"label of {sid}") == (
        "the referenced session 'label of demo-notes' does not exist (was it deleted?)"
    )


def test_the_self_reference_is_said_once() -> None:
    err = SessionReferenceError(
        "a session cannot reference itself ('a')", SESSION_REFERENCE_SELF_REFERENCE
    )
    assert describe_error(err) == "a message cannot reference its own session"


def test_too_many_keeps_the_numbers_of_the_core_message() -> None:
    err = SessionReferenceError(
        "4 sessions referenced; at most 3 allowed", SESSION_REFERENCE_TOO_MANY
    )
    assert describe_error(err) == (
        "too many referenced sessions in one message: 4 sessions referenced; at most 3 allowed"
    )


@pytest.mark.parametrize(
    "err",
    [
        SessionReferenceError("\x1b[2J[bold]x[/]\nnext", SESSION_REFERENCE_INVALID_REFERENCE),
        SessionReferenceError("x", SESSION_REFERENCE_READ_FAILED, session_id="id\x1b]0;t\x07\n"),
        StoreError("bad \x9b31m\r\nline"),
        OSError(errno.EACCES, "Permission denied", "/x/out\x1b[2J.md"),
    ],
)
def test_hostile_text_becomes_one_safe_line(err: BaseException) -> None:
    words = describe_error(err)
    assert "\n" not in words and "\r" not in words
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in words), words


def test_store_faults_in_plain_words() -> None:
    assert describe_error(DiskFullError("/x: write failed: database or disk is full")) == (
        "the disk is full"
    )
    assert describe_error(OSError(errno.ENOSPC, "No space left on device", "/x")) == (
        "the disk is full"
    )
    assert describe_error(StoreError("/x/db: write failed: database is locked")) == (
        "the database is busy (another dsh is writing to it); try again in a moment"
    )
    assert describe_error(SessionBusyError("s")) == SessionBusyError.MESSAGE
    assert describe_error(RuntimeError()) == "RuntimeError"


def test_fault_messages_name_the_action_and_the_cause() -> None:
    locked = StoreError("/x/db.sqlite3: write failed: database is locked")
    assert fault_message(locked, "rename the session") == (
        "Could not rename the session: the database is busy (another dsh is writing to it); "
        "try again in a moment."
    )
    full = OSError(errno.ENOSPC, "No space left on device", "/x/db.sqlite3")
    assert (
        fault_message(full, "export the session")
        == "Could not export the session: the disk is full."
    )
    denied = OSError(errno.EACCES, "Permission denied", "/x/out\x1b[2J.md")
    message = fault_message(denied, "export the session")
    assert message.startswith("Could not export the session: Permission denied (/x/out")
    assert "\x1b" not in message
    odd = InvalidEventError("line one\nline two")
    assert fault_message(odd, "save the reply") == r"Could not save the reply: line one\nline two."
    gone = SessionNotFoundError("abc")
    assert fault_message(gone, "rename the session") == (
        "Could not rename the session: the session no longer exists (deleted elsewhere?)."
    )


def test_sentence() -> None:
    assert sentence("the disk is full") == "The disk is full."
    assert sentence("done?") == "Done?"


def test_a_busy_session_says_how_to_free_it_unless_someone_surely_writes() -> None:
    from core.leases import lease_owner

    elsewhere = "box:0123456789abcdef:4242:x"  # another machine or container: may be gone
    assert describe_error(SessionBusyError("s-1", elsewhere)) == (
        f"{SessionBusyError.MESSAGE} (if none is, `dsh unlock s-1` frees it)"
    )
    assert describe_error(SessionBusyError("s-1", "an older dsh's host:1:x")).endswith(
        "(if none is, `dsh unlock s-1` frees it)"
    )
    # A name the shell would split or run is quoted; control characters are escaped.
    assert describe_error(SessionBusyError("a b;\x1b[2J", elsewhere)).endswith(
        "(if none is, `dsh unlock 'a b;\\x1b[2J'` frees it)"
    )
    # A process of this machine runs under it (this one): it surely writes. Unknown: no hint.
    assert describe_error(SessionBusyError("s-1", lease_owner())) == SessionBusyError.MESSAGE
    assert describe_error(SessionBusyError("s-1")) == SessionBusyError.MESSAGE


def test_a_lost_lease_says_another_process_took_it_and_what_stopped() -> None:
    took = (
        "another process took this session's reply lease (it was broken with `dsh unlock`, "
        "or ran out while this dsh stalled)"
    )
    holder = "box:0123456789abcdef:77:\x1b[2J"  # never shown: not the user's business here
    assert describe_error(LeaseLostError("s", "reply", holder)) == (
        f"{took}: the reply stopped; your message is saved, the partial reply is not"
    )
    assert describe_error(LeaseLostError("s", "compaction")) == (
        f"{took}: the compaction stopped; nothing was compacted"
    )
    assert describe_error(LeaseLostError("s", "message")) == f"{took}: nothing was sent"
    # The app's notices keep the words as they are: no "Could not …" in front.
    assert fault_message(LeaseLostError("s", "compaction"), "compact the session") == (
        sentence(describe_error(LeaseLostError("s", "compaction")))
    )
    assert fault_message(LeaseLostError("s", "message"), "send the message").startswith(
        "Another process took this session's reply lease"
    )
