"""Issue 13, "a newcomer's first hour": the command line's messages, confirmations and output."""

from __future__ import annotations

from tests.cli.conftest import Run


def new(dsh: Run, *args: str) -> str:
    result = dsh("new", *args)
    assert result.code == 0, result.err
    return result.out.strip()


def test_reference_to_a_deleted_session_is_one_plain_line(dsh: Run) -> None:
    target = new(dsh)
    gone = new(dsh)
    mention = dsh("mention", gone).out.strip()
    assert dsh("delete", gone).code == 0
    result = dsh("send", target, f"look at {mention}")
    assert result.code == 1
    assert result.err == (
        f"dsh: error: the referenced session '{gone}' does not exist (was it deleted?) "
        "[SESSION_REFERENCE_READ_FAILED] — nothing was sent\n"
    )
    assert "Error(" not in result.err


def test_self_reference_says_it_once(dsh: Run) -> None:
    target = new(dsh)
    mention = dsh("mention", target).out.strip()
    result = dsh("prepare", "--session", target, f"me {mention}")
    assert result.code == 1
    assert result.err == (
        "dsh: error: a message cannot reference its own session "
        "[SESSION_REFERENCE_SELF_REFERENCE]\n"
    )
