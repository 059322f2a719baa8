"""``dsh usage SESSION [--json]``: the context meter of the app's status line, as figures.

Tokens of the session's replies so far (retried and compacted ones included: they were
paid for), their cost at the profile's prices, and the size of the next request against
the profile's context window (``core.usage.measure``). The provider's own counts where it
reported them; estimates (the offline model, a request not sent yet) are marked ``≈``.
"""

from __future__ import annotations

import argparse
import sys

from core.display import single_line, terminal_json
from core.usage import SessionUsage, format_tokens, measure
from tui.cli.common import resolve
from tui.cli.replying import profile_words
from tui.cli.subparsers import add_usage_parser as add_parser
from tui.shared.runtime import Runtime

__all__ = ["add_parser", "cmd_usage", "usage_lines"]


def _tokens(count: int, exact: bool) -> str:
    """An exact count in full (``12,345``); an estimate rounded and marked (``≈12k``)."""
    return f"{count:,}" if exact else f"≈{format_tokens(count)}"


def _dollars(cost: float) -> str:
    if 0 < cost < 0.00005:
        return "<$0.0001"
    return f"${cost:,.4f}" if cost < 100 else f"${cost:,.2f}"


def _share(share: float) -> str:
    if 0 < share < 0.01:
        return "<1%"
    return f"{share:.0%}"


def usage_lines(usage: SessionUsage, profile: str) -> list[str]:
    """The human form: aligned ``label  value`` lines (``profile``: its words, safe)."""
    exact = usage.tokens_exact
    if usage.cost is None:
        cost = "— (the profile sets no prices)"
    else:
        cost = ("" if exact else "≈") + _dollars(usage.cost)
    window = format_tokens(usage.context_window)
    window += (
        " (assumed: the profile sets no context_window)" if usage.context_window_assumed else ""
    )
    rows = [
        ("profile", profile),
        ("replies", str(usage.replies)),
        ("input tokens", _tokens(usage.input_tokens, exact)),
        ("output tokens", _tokens(usage.output_tokens, exact)),
        ("cost", cost),
        (
            "next request",
            f"{_tokens(usage.next_request_tokens, usage.next_request_exact)} tokens, "
            f"{_share(usage.share)} of the context window",
        ),
        ("context window", window),
    ]
    width = max(len(label) for label, _ in rows)
    return [f"{label.ljust(width)}  {value}" for label, value in rows]


async def cmd_usage(rt: Runtime, args: argparse.Namespace) -> int:
    header = await resolve(rt, args.session)
    chosen = await rt.session_profile(header.id)
    if chosen.note:  # the recorded profile is gone from the config: say which one counts
        print(f"dsh: note: {single_line(chosen.note)}", file=sys.stderr)
    chat = rt.chat_for(header, chosen.profile)
    usage = await measure(chat, rt.config.profiles)
    if args.json:
        print(terminal_json(usage.as_json()))
        return 0
    print("\n".join(usage_lines(usage, profile_words(chosen.profile))))
    return 0
