"""An ACP prompt (content blocks) as the composer text the engine already understands.

Text blocks are taken as typed (Markdown mentions and bare ``dsh-session:`` URIs included);
a ``resource_link`` block whose ``uri`` is a ``dsh-session:`` URI becomes the mention
``@[name](uri)``. The result is parsed and prepared exactly like a TUI draft (SPEC §4–§5).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from acp.schema import ResourceContentBlock, TextContentBlock

from core.references import (
    SESSION_REFERENCE_INVALID_REFERENCE,
    SESSION_REFERENCE_SCHEME,
    SessionReferenceError,
    SessionReferenceInput,
    decode_session_reference_uri,
    format_session_reference_mention,
)

__all__ = ["PromptCommand", "UnsupportedContentError", "parse_command", "prompt_to_draft"]

COMMAND_NAMES = ("sessions",)
_COMMAND = re.compile(r"/([A-Za-z][\w-]*)(?:\s+(.*))?", re.DOTALL)


class UnsupportedContentError(ValueError):
    """The prompt holds a block kind dsh did not advertise (image, audio, embedded resource)."""


@dataclass(frozen=True, slots=True)
class PromptCommand:
    """A slash command typed as the whole prompt: ``/sessions [query]``."""

    name: str
    argument: str


def _link_text(block: ResourceContentBlock) -> str:
    uri = block.uri
    if not uri.startswith(SESSION_REFERENCE_SCHEME):
        # Another kind of resource (a file, a URL): dsh does not read it, so the model
        # gets the link itself as text.
        return f"[{block.name}]({uri})"
    try:
        session_id = decode_session_reference_uri(uri)
    except SessionReferenceError as err:
        raise SessionReferenceError(
            f"resource link {block.name!r} has a malformed session URI {uri!r}: {err.message}",
            SESSION_REFERENCE_INVALID_REFERENCE,
        ) from err
    label = block.name if block.name else session_id
    return format_session_reference_mention(SessionReferenceInput(session_id, label))


def _join(left: str, piece: str, *, link: bool, after_link: bool) -> str:
    """Append ``piece``: text fragments are contiguous; a space keeps a mention apart from
    the words around it (the parser needs none, but the readable text does)."""
    if not left or not piece:
        return left + piece
    if link and not left[-1].isspace() and left[-1] not in "([{\"'":
        return left + " " + piece
    if after_link and piece[0].isalnum():
        return left + " " + piece
    return left + piece


def prompt_to_draft(blocks: Sequence[object]) -> str:
    """The draft text of a prompt. Raises ``SessionReferenceError`` for a malformed
    session link and ``UnsupportedContentError`` for a block kind we do not accept."""
    draft = ""
    after_link = False
    for block in blocks:
        if isinstance(block, TextContentBlock):
            draft = _join(draft, block.text, link=False, after_link=after_link)
            after_link = False
        elif isinstance(block, ResourceContentBlock):
            text = _link_text(block)
            draft = _join(draft, text, link=True, after_link=after_link)
            after_link = True
        else:
            kind = getattr(block, "type", type(block).__name__)
            raise UnsupportedContentError(
                f"dsh accepts text and resource links only, not {kind!s} content"
            )
    return draft


def parse_command(draft: str) -> PromptCommand | None:
    """``/sessions [query]`` → the command; anything else (other slashes too) is a message."""
    match = _COMMAND.fullmatch(draft.strip())
    if match is None or match.group(1) not in COMMAND_NAMES:
        return None
    return PromptCommand(match.group(1), (match.group(2) or "").strip())
