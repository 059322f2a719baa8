"""The commands that find sessions and messages: ``search`` (messages by their words),
``candidates`` (what a message could reference) and ``mention`` (the @ mention of one)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from core.display import single_line, terminal_json
from core.references.config import SessionReferenceError
from tui.cli.common import CliError, reference_error_line, resolve
from tui.cli.hitlines import plain_pipe, plain_search_table
from tui.shared.searching import FoundMessages, find_messages

if TYPE_CHECKING:  # (``print_found`` serves ``dsh search``'s one-shot read too: ``quick``)
    from tui.shared.runtime import Runtime

__all__ = ["cmd_candidates", "cmd_mention", "cmd_search", "print_found"]


async def cmd_mention(rt: Runtime, args: argparse.Namespace) -> int:
    from core.references.labels import safe_mention

    header = await resolve(rt, args.session)
    title = await rt.query.read_title(header.id)
    # A one-line, bounded label without control/format characters or "<"/">": the mention
    # lands in the user's own message (``dsh send X "… $(dsh mention Y)"``).
    print(safe_mention(header.id, title.title if title else None))
    return 0


async def cmd_candidates(rt: Runtime, args: argparse.Namespace) -> int:
    from core.references.labels import safe_mention

    header = await resolve(rt, args.session)
    try:
        rows = await rt.service.discover(header, args.query)
    except SessionReferenceError as err:
        raise CliError(reference_error_line(err)) from err
    if args.json:
        print(
            terminal_json(
                [
                    {
                        "id": row.candidate.session_id,
                        "label": row.candidate.label,
                        "cwd": row.candidate.cwd,
                        "created_at": row.candidate.created_at,
                        "mention": safe_mention(row.candidate.session_id, row.candidate.label),
                        # A body match: the message that matched (null: id, cwd or title).
                        "match": None
                        if row.hit is None
                        else {"seq": row.hit.seq, "snippet": row.hit.snippet},
                    }
                    for row in rows
                ]
            )
        )
        return 0
    for row in rows:
        c = row.candidate
        where = single_line(c.cwd) if c.cwd else "no cwd"
        line = f"{single_line(c.label, 50)}\t{where}\t{safe_mention(c.session_id, c.label)}"
        if row.hit is not None:
            line += f"\t#{row.hit.seq} {single_line(row.hit.snippet)}"
        print(line)
    return 0


async def cmd_search(rt: Runtime, args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise CliError(f"--limit must be a positive number, not {args.limit}")
    return print_found(await find_messages(rt, args.query, args.limit), args.query, args.json)


def print_found(found: FoundMessages, query: str, as_json: bool) -> int:
    """What ``dsh search QUERY`` prints of ``found`` (the note on stderr), either way it
    was read."""
    if found.note:
        print(f"dsh: note: {found.note}", file=sys.stderr)
    hits, title_of = found.hits, found.titles
    if as_json:
        print(terminal_json(found.json_rows()))
        return 0
    if not hits:
        print(
            f"No message contains: {single_line(query, 60)}"
            if query.strip()
            else "Nothing to search for: give a word or two."
        )
        return 0
    rows = [
        (title_of.get(h.session_id) or h.session_id, h.session_id, h.seq, h.snippet, h.spans)
        for h in hits
    ]
    text = plain_search_table(rows) if plain_pipe() else None
    if text is not None:  # a pipe or a file: the text Rich would write there, without Rich
        sys.stdout.write(text)
        return 0
    from tui.cli.output import print_search_hits  # Rich loads only to draw

    print_search_hits(rows)
    return 0
