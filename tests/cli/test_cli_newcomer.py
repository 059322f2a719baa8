"""Issue 13, "a newcomer's first hour": the command line's messages, confirmations and output."""

from __future__ import annotations

import pytest

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


@pytest.mark.parametrize(
    "command",
    [
        ("delete", "{name}"),
        ("show", "{name}"),
        ("send", "{name}", "hello"),
        ("rename", "{name}", "new title"),
        ("export", "{name}"),
        ("mention", "{name}"),
        ("compact", "{name}"),
        ("candidates", "{name}"),
        ("prepare", "--session", "{name}", "hello"),
    ],
)
def test_a_name_that_is_a_title_and_an_id_prefix_is_an_error_listing_both(
    dsh: Run, command: tuple[str, ...]
) -> None:
    prefixed = new(dsh)
    titled = new(dsh)
    name = prefixed[:8]
    assert dsh("rename", titled, name).code == 0
    assert dsh("rename", prefixed, "evil \x1b[31m title").code == 0
    before = dsh("show", titled, "--json").json()

    result = dsh(*(part.format(name=name) for part in command))

    assert result.code == 1 and result.out == ""
    lines = result.err.splitlines()
    assert lines[0] == (
        f"dsh: error: '{name}' names 2 sessions (1 by title, 1 by id prefix); "
        "name one by its full id"
    )
    assert sorted(lines[1:]) == sorted(
        [f"  {titled}  {name}", f"  {prefixed}  evil \\x1b[31m title"]
    )
    assert dsh("show", titled, "--json").json() == before, "nothing changed"
    assert dsh("show", prefixed, "--json").code == 0, "nothing deleted"
