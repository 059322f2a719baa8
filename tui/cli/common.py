"""What every ``dsh`` command module shares: the one-line error, reading ``-`` from standard
input, and naming a session on the command line (``commands.py`` and the modules beside it
import these; none of them imports ``commands.py``)."""

from __future__ import annotations

import argparse
import sys

from core.damage import damage_line
from core.log import SessionHeader
from core.references import SessionReferenceError
from core.resolve import SessionNameError, resolve_session_name
from tui.shared.errors import describe_error
from tui.shared.runtime import Runtime

__all__ = [
    "SESSION_ARG_HELP",
    "SESSION_NAME_HELP",
    "CliError",
    "add_profile_option",
    "read_arg",
    "reference_error_line",
    "resolve",
    "seq_arg",
]


class CliError(Exception):
    """A user-facing failure: printed as one line, exit code 1."""


SESSION_ARG_HELP = "the session: its id, a unique id prefix, or its exact title"
SESSION_NAME_HELP = (
    "Name a session by its full id, by a prefix of its id that no other id starts with, or "
    "by its exact title (`dsh sessions` lists them); a name that fits two sessions is an "
    "error that lists both."
)


def read_arg(text: str) -> str:
    """The argument, or all of standard input for ``-``. Bytes that are not UTF-8 become
    lone surrogates, as in the arguments themselves, whatever the locale: kept, never an
    error (only what goes over the wire is made valid UTF-8)."""
    if text != "-":
        return text
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:  # a text-only stand-in
        return sys.stdin.read()
    data: bytes = stream.read()
    return data.decode("utf-8", "surrogateescape")


async def resolve(rt: Runtime, name: str) -> SessionHeader:
    """The session ``name`` names (``SessionNameError`` when none or several)."""
    headers = await rt.query.list_sessions()
    titles = await rt.query.read_titles()
    try:
        return resolve_session_name(name, headers, titles)
    except SessionNameError:
        # A session the listing skipped as damaged, named by its full id: say why.
        for row in rt.store.damaged_rows():
            if row.what == "session" and row.session_id == name:
                raise CliError(damage_line(row)) from None
        raise


def reference_error_line(err: SessionReferenceError) -> str:
    return f"{describe_error(err)} [{err.code}]"


def add_profile_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--profile NAME`` on a command that asks the model (``what``: what it does then)."""
    parser.add_argument(
        "--profile",
        metavar="NAME",
        help=f"{what} (recorded in the session's log and said on stderr; `dsh profiles` "
        "lists them). Checked first: an unknown profile, or one whose API key is not set, "
        "is one line and stores nothing",
    )


def seq_arg(text: str) -> int:
    """A SEQ argument: an event's number in its session's log (0 or more)."""
    if text.isascii() and text.isdigit():
        return int(text)
    raise argparse.ArgumentTypeError(f"expected an event number (0 or more), got {text!r}")
