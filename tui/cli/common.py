"""What every ``dsh`` command module shares: the one-line error, reading ``-`` from standard
input, and naming a session on the command line (``commands.py`` and the modules beside it
import these; none of them imports ``commands.py``). Light: ``commands.py`` imports it
before any command runs, so what ``resolve`` needs loads when it is called."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from tui.cli.subparsers import SESSION_ARG_HELP, SESSION_NAME_HELP, add_profile_option, seq_arg

if TYPE_CHECKING:  # loaded by the commands that use them, never by the parser
    from core.log import SessionHeader
    from core.references import SessionReferenceError
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
    from core.damage import damage_line
    from core.resolve import SessionNameError, resolve_session_name

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
    from tui.shared.errors import describe_error

    return f"{describe_error(err)} [{err.code}]"
