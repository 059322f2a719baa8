"""``dsh show``, ``dsh export`` and ``dsh replay --text`` of a whole session, streamed
(issue 31: a 1 GB session took 3-4 GB): the session is read in pages (``core.paging``)
on the event loop while a worker thread draws or encodes each item and writes it out,
so memory is bounded by a page, not by the log. What is written is exactly what the
whole reads wrote; an export to a file still lands whole or not at all."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from core.display import escape_json_text, single_line
from core.errors import InvalidEventError
from core.jsoncodec import dumps_js
from core.log import Event
from core.logfile import event_to_json, export_jsonl
from core.paging import (
    event_pages,
    flattened_in_thread,
    open_surface_stream,
    read_last_seq,
    unknown_event_pages,
)
from core.query import SessionQueryLike
from core.store import SessionStore

__all__ = ["CannotExport", "export_session", "print_events_json", "print_surface"]

T = TypeVar("T")


class CannotExport(Exception):
    """The export cannot be written; the message is the one line to show."""


async def _in_thread(
    pages: AsyncIterator[Sequence[Event]], consume: Callable[[Iterator[Event]], T]
) -> T:
    """``consume(events)`` in a worker thread, the events read page by page on this loop.
    Cancelled (Ctrl+C), the thread stops at its next page; ``asyncio.run`` closes
    ``pages``."""
    loop = asyncio.get_running_loop()
    stop = threading.Event()
    try:
        return await asyncio.to_thread(consume, flattened_in_thread(pages, loop, stop))
    finally:
        stop.set()


async def print_surface(
    store: SessionStore, query: SessionQueryLike, session_id: str, *, expand: bool
) -> None:
    """The whole transcript, as ``dsh show`` prints it (``print_transcript``)."""
    from tui.cli.output import print_transcript  # Rich loads only to draw

    stream = await open_surface_stream(store, session_id)
    title = await query.read_title(session_id)
    text = title.title if title else None
    await _in_thread(
        stream.pages(),
        lambda events: print_transcript(stream.header, text, events, expand=expand),
    )


async def print_events_json(store: SessionStore, session_id: str) -> None:
    """The raw log as one JSON array (``dsh show --json``), escaped for a terminal."""
    _header, last = await read_last_seq(store, session_id)

    def write(events: Iterator[Event]) -> None:
        out = sys.stdout
        out.write("[")
        for index, event in enumerate(events):
            if index:
                out.write(",")
            out.write(escape_json_text(dumps_js(event_to_json(event))))
        out.write("]\n")

    await _in_thread(event_pages(store, session_id, last), write)


async def export_session(
    store: SessionStore,
    query: SessionQueryLike,
    session_id: str,
    fmt: str,
    output: str | None,
) -> Path | None:
    """``dsh export``: the session in ``fmt`` (json, reference, md) to standard output,
    or to ``output`` all or nothing (returns the path written). ``CannotExport`` says why
    not, in one line."""
    make: Callable[[Iterable[Event]], Iterator[str]]
    header, last = await read_last_seq(store, session_id)  # the prefix exported
    if fmt == "md":  # the whole conversation: what compactions took off stays, marked
        from tui.shared.export import markdown_lines
        from tui.shared.history import in_history, taken_off

        taken = await _in_thread(event_pages(store, session_id, last), taken_off)
        title = await query.read_title(session_id)
        text = title.title if title else None

        def make(events: Iterable[Event]) -> Iterator[str]:
            history = (event for event in events if in_history(event))
            return markdown_lines(header, text, history, taken)

    elif fmt == "reference":
        from core.importers.reference import REFERENCE_HEADER_EVENT, streamed_reference_lines

        heads = [
            event
            async for page in unknown_event_pages(store, session_id, last)
            for event in page
            if event.type == REFERENCE_HEADER_EVENT
        ]

        def make(events: Iterable[Event]) -> Iterator[str]:
            return streamed_reference_lines(header, heads, events)

    else:

        def make(events: Iterable[Event]) -> Iterator[str]:
            return export_jsonl(header, events)

    pages = event_pages(store, session_id, last)

    def to_stdout(events: Iterator[Event]) -> None:
        # Control, bidi and format characters become \uXXXX escapes: the same JSON values,
        # so ``dsh import`` reads back the identical session. Characters beyond the BMP (tag
        # characters) are escaped as surrogate pairs on a terminal (read back as the
        # character, SPEC §4.1) and kept raw in a pipe or a file, byte for byte.
        keep = not sys.stdout.isatty()
        for line in make(events):
            if fmt != "md":  # Markdown is escaped by markdown_lines
                line = escape_json_text(line, keep_astral=keep)
            sys.stdout.write(line + "\n")

    def to_file(events: Iterator[Event]) -> Path:
        from tui.shared.files import write_streamed_atomically

        assert output is not None
        return write_streamed_atomically(Path(output), (line + "\n" for line in make(events)))

    try:
        if output is None:
            await _in_thread(pages, to_stdout)
            return None
        return await _in_thread(pages, to_file)
    except InvalidEventError as err:  # a log a reference log cannot hold
        raise CannotExport(f"cannot export {single_line(header.id)}: {err}") from err
    except (OSError, ValueError) as err:  # ValueError: a NUL or a lone surrogate
        if output is None:
            raise
        reason = getattr(err, "strerror", None) or err
        raise CannotExport(f"cannot write {output}: {reason}; nothing was written") from err
