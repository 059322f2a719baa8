"""The declarations of the ``dsh`` commands that live in their own modules (``control``,
``profiles``, ``usage``) and what every parser shares: light, so that ``dsh --help`` and
the parser never import a command's module (each loads only when its command runs)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = [
    "SESSION_ARG_HELP",
    "SESSION_NAME_HELP",
    "add_control_parsers",
    "add_profile_option",
    "add_profiles_parser",
    "add_usage_parser",
    "seq_arg",
]


SESSION_ARG_HELP = "the session: its id, a unique id prefix, or its exact title"
SESSION_NAME_HELP = (
    "Name a session by its full id, by a prefix of its id that no other id starts with, or "
    "by its exact title (`dsh sessions` lists them); a name that fits two sessions is an "
    "error that lists both."
)


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


def add_control_parsers(sub: Any) -> None:
    """The parsers of ``retry``, ``edit`` and ``fork`` (``sub``: argparse's subparsers)."""
    p = sub.add_parser(
        "retry",
        help="answer the last message again; the earlier reply stays in the log",
        description="Ask the model again for the reply to SESSION's last message and stream "
        "it. The new reply takes the earlier one's place in the conversation (what the "
        "model sees next); the earlier one stays in the log, shown by `dsh show --json` and "
        "`dsh export` (marked replaced). A message without a reply is simply answered. "
        + SESSION_NAME_HELP,
    )
    p.add_argument("session", help=SESSION_ARG_HELP)
    add_profile_option(p, "answer with profile NAME, and keep it for the session")

    p = sub.add_parser(
        "edit",
        help="replace one of your messages by TEXT and stream the new reply",
        description="Send TEXT in place of your message SEQ (its number in the log: `dsh "
        "show` prints it as #SEQ) and stream the reply. The conversation goes on from the "
        "edited message: what came after it leaves the conversation as with a compaction, "
        "and stays in the log (`dsh show --json`, `dsh export`). " + SESSION_NAME_HELP,
    )
    p.add_argument("session", help=SESSION_ARG_HELP)
    p.add_argument("seq", type=seq_arg, metavar="SEQ", help="one of your messages in SESSION")
    p.add_argument("text", help="the new message (mentions allowed); '-' reads standard input")
    add_profile_option(p, "answer with profile NAME, and keep it for the session")

    p = sub.add_parser(
        "fork",
        help="copy a session's conversation into a new session and print its id",
        description="Create a session whose conversation is SESSION's up to message SEQ (all "
        "of it without --at), and print its id. The fork records where it comes from "
        "(`dsh sessions` shows it) and answers with SESSION's profile; it is an ordinary "
        "session from then on, to send to or @-mention. SESSION is left as it is. "
        + SESSION_NAME_HELP,
    )
    p.add_argument("session", help=SESSION_ARG_HELP)
    p.add_argument(
        "--at",
        type=seq_arg,
        metavar="SEQ",
        help="the last message to take over (a message of the current conversation)",
    )
    p.add_argument("--title", metavar="TITLE", help="the fork's title (default: 'Fork of …')")


def add_profiles_parser(sub: Any) -> None:
    p = sub.add_parser(
        "profiles",
        help="list the configured profiles (model set-ups) and the default one",
        description="List the profiles of the config file (`[profiles.NAME]`, `offline` "
        "built in, the top-level provider settings as `default`): name, provider, model, "
        "which one new sessions use ($DSH_PROFILE or default_profile), and the variable "
        "holding each API key, with a note when it is not set. Keys are never shown.",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help='print [{"name", "provider", "model", "default"}] (default: true for one)',
    )


def add_usage_parser(sub: Any) -> None:
    p = sub.add_parser(
        "usage",
        help="tokens, cost and context-window share of a session",
        description="Print SESSION's profile, the tokens its replies used (input and "
        "output, summed over every reply in its log), their cost when the profile has "
        "prices, and the size of the next request against the profile's context window. "
        "Figures marked ≈ are estimates. " + SESSION_NAME_HELP,
    )
    p.add_argument("session", help=SESSION_ARG_HELP)
    p.add_argument(
        "--json",
        action="store_true",
        help='print {"profile", "input_tokens", "output_tokens", "cost", '
        '"next_request_tokens", "context_window", "next_request_exact", "replies"} '
        "(cost null without prices)",
    )
