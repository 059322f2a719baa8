"""The words of the context meter: the next request's tokens, its share of the profile's
context window, the cost so far, and what a draft's references add before it is sent.

Plain functions over ``core.usage`` values, so every front end that shows the meter says
it the same way. Every piece of untrusted text (a model name) is made one safe line here.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.display import single_line
from core.usage import DraftUsage, SessionUsage, format_tokens

__all__ = [
    "ESTIMATED",
    "MeterLine",
    "draft_words",
    "format_bytes",
    "format_cost",
    "meter_line",
    "meter_tooltip",
    "overflow_words",
    "window_words",
]

ESTIMATED = "≈"
"""The mark in front of a token count that is an estimate, not the provider's count."""

MODEL_CHARS = 30
"""How much of a model's name the meter keeps."""


def format_cost(cost: float) -> str:
    """``$0.012``: dollars, to a tenth of a cent (``<$0.001`` below that, ``$0`` for none)."""
    if cost <= 0:
        return "$0"
    if cost < 0.001:
        return "<$0.001"
    if cost < 100:
        return f"${cost:.3f}"
    return f"${cost:,.2f}"


def format_bytes(count: int) -> str:
    """``812 B``, ``4.1 KB``, ``41 KB``, ``1.2 MB`` (1 KB = 1024 bytes)."""
    if count < 1024:
        return f"{count} B"
    kib = count / 1024
    if kib < 10:
        return f"{kib:.1f} KB".replace(".0 KB", " KB")
    if kib < 1024:
        return f"{round(kib)} KB"
    return f"{kib / 1024:.1f} MB".replace(".0 MB", " MB")


def _tokens(count: int, exact: bool) -> str:
    return format_tokens(count) if exact else ESTIMATED + format_tokens(count)


def window_words(usage: SessionUsage) -> str:
    """``128k``, or ``128k (assumed)`` when the profile sets no ``context_window``."""
    window = format_tokens(usage.context_window)
    return f"{window} (assumed)" if usage.context_window_assumed else window


def draft_words(draft: DraftUsage) -> str:
    """What a draft's mentions add: ``3 references · 41 KB · ≈12k tokens``."""
    noun = "reference" if draft.references == 1 else "references"
    return (
        f"{draft.references} {noun} · {format_bytes(draft.snapshot_bytes)}"
        f" · {ESTIMATED}{format_tokens(draft.tokens)} tokens"
    )


def overflow_words(model: str, usage: SessionUsage, over: int) -> str:
    """``over the context window of deepseek-chat (128k) by ≈3k tokens`` (``(128k,
    assumed)`` when the profile sets no window)."""
    window = format_tokens(usage.context_window)
    if usage.context_window_assumed:
        window += ", assumed"
    return (
        f"over the context window of {single_line(model, MODEL_CHARS)} ({window})"
        f" by {ESTIMATED}{format_tokens(over)} tokens"
    )


@dataclass(frozen=True, slots=True)
class MeterLine:
    """The meter as one line, and whether it warns (the next request would not fit)."""

    text: str
    warning: bool = False


def meter_line(
    usage: SessionUsage,
    model: str,
    *,
    draft: DraftUsage | None = None,
    draft_tokens: int = 0,
) -> MeterLine:
    """The meter of a session: ``≈1.2k tokens next · 1% of 128k (assumed) · $0.012 so far``.

    ``draft``: the references of the draft in the composer, shown instead of the next
    request's tokens (``3 references · 41 KB · ≈12k tokens · 10% of 128k``: the share is
    that of the next request with them); ``draft_tokens``: what the draft adds to the next
    request (its references and text; an estimate). When the next request with the draft
    would not fit the context window, the line says by how much, first, and warns. The
    most important comes first: a narrow status line cuts the end."""
    total = usage.next_request_tokens + draft_tokens
    exact = usage.next_request_exact and draft_tokens == 0
    share = total / usage.context_window if usage.context_window else 0.0
    parts: list[str] = []
    over = total - usage.context_window
    if over > 0:
        parts.append(overflow_words(model, usage, over))
    references = draft is not None and draft.references > 0
    if draft is not None and references:
        parts.append(draft_words(draft))
    if over > 0 or not references:  # (with references, the share says where they lead)
        parts.append(f"{_tokens(total, exact)} tokens next")
    if over <= 0:
        parts.append(f"{_percent(share)} of {window_words(usage)}")
    if usage.cost is not None:
        parts.append(f"{format_cost(usage.cost)} so far")
    return MeterLine(" · ".join(parts), warning=over > 0)


def _percent(share: float) -> str:
    """``12%``; ``<1%`` for a request that takes almost nothing of the window."""
    if 0 < share < 0.01:
        return "<1%"
    return f"{round(share * 100)}%"


def meter_tooltip(usage: SessionUsage, model: str, *, draft_tokens: int = 0) -> str:
    """The meter spelled out (its hover text)."""
    model = single_line(model, MODEL_CHARS)
    lines = [
        f"Profile {single_line(usage.profile, 64)} ({model}).",
        f"Next request: {usage.next_request_tokens:,} tokens"
        + (
            " (the provider's count)."
            if usage.next_request_exact
            else " (an estimate: about 4 bytes a token)."
        ),
    ]
    if draft_tokens:
        lines.append(f"The draft adds about {draft_tokens:,} tokens.")
    lines.append(
        f"Context window: {usage.context_window:,} tokens"
        + (
            " (assumed: the profile sets no context_window)."
            if usage.context_window_assumed
            else "."
        )
    )
    lines.append(
        f"Replies so far: {usage.replies}, {usage.input_tokens:,} tokens in,"
        f" {usage.output_tokens:,} out"
        + ("." if usage.cost is None else f", {format_cost(usage.cost)}.")
    )
    return "\n".join(lines)
