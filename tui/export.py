"""Markdown export of a session's current conversation (reference cards included).

Untrusted text is escaped with ``core.display`` (one-line fields with ``single_line``,
bodies with ``escape_control``): the export is read with ``cat`` and in editors, so no
control, bidi or format character is written raw. (The lossless form is the JSON log.)
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from core.cards import card_summary, card_title
from core.display import escape_control, single_line
from core.log import Event, SessionHeader, message_text
from tui.render import classify_surface

__all__ = ["export_markdown", "write_atomically", "write_new_file"]


def _fence(text: str) -> str:
    """A code fence longer than any backtick run inside ``text``."""
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def _quote(text: str) -> list[str]:
    return ["> " + line if line else ">" for line in text.split("\n")]


def _stamp(ms: int) -> str:
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")
    except (OverflowError, OSError, ValueError):
        return "?"


def export_markdown(header: SessionHeader, title: str | None, events: Sequence[Event]) -> list[str]:
    lines = [f"# {single_line(title or header.id)}", ""]
    lines.append(f"- session: `{single_line(header.id)}`")
    lines.append(
        f"- cwd: `{single_line(header.cwd)}`" if header.cwd is not None else "- cwd: (none)"
    )
    lines.append(f"- created: {_stamp(header.created_at)}")
    for item in classify_surface(events):
        event = item.event
        lines.append("")
        if item.kind == "card" and item.card is not None:
            lines.append(f"### {single_line(card_title(item.card))}")
            lines.append("")
            lines.append(f"_{single_line(card_summary(item.card))}_")
            for source in item.card.sources:
                lines.append("")
                lines.append(
                    f"- **{single_line(source.label)}** (`{single_line(source.session_id)}`), "
                    f"captured through seq "
                    f"{source.captured_through_seq}: kept {source.retained_messages}/"
                    f"{source.original_messages}, omitted {source.omitted_messages} messages / "
                    f"{source.omitted_bytes} bytes"
                    + (", compacted" if source.compacted else "")
                    + (", truncated" if source.truncated else "")
                )
            continue
        if item.kind == "assistant":
            message = event.data.get("message")
            text = message_text(message) if isinstance(message, Mapping) else ""
            lines += [f"## Assistant · {_stamp(event.time)}", "", escape_control(text)]
            if event.data.get("finish") == "interrupted":
                lines += ["", "_(interrupted)_"]
            continue
        if item.kind == "user":
            lines += [
                f"## You · {_stamp(event.time)}",
                "",
                *_quote(escape_control(message_text(event.data))),
            ]
            continue
        if item.kind == "checkpoint":
            body = escape_control(message_text(event.data))
            fence = _fence(body)
            lines += ["## Compacted summary", "", fence, body, fence]
            continue
        if item.kind == "steering":
            message = event.data.get("message")
            text = message_text(message) if isinstance(message, Mapping) else ""
            lines += [
                f"## You (steering) · {_stamp(event.time)}",
                "",
                *_quote(escape_control(text)),
            ]
            continue
        lines.append(f"_({single_line(event.type)} event #{event.seq} not shown)_")
    return lines


def _write_temp(directory: Path, name: str, data: bytes) -> Path:
    """``data`` in a new hidden file beside ``name`` in ``directory``, flushed to disk."""
    while True:
        temp = directory / f".{name}.{secrets.token_hex(4)}.tmp"
        try:  # 0o666 less the umask, as an ordinary new file
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        break
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    return temp


def _sync_directory(directory: Path) -> None:
    with contextlib.suppress(OSError):  # not every platform or file system allows it
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_atomically(path: Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` all or nothing: a temp file in the same directory,
    fsynced, then renamed over ``path`` (a full disk leaves the old file as it was). A
    symlink is followed; an existing file keeps its permissions. Returns the path written."""
    data = text.encode("utf-8")  # a lone surrogate fails here, before any file is touched
    target = Path(os.path.realpath(path))
    temp = _write_temp(target.parent, target.name, data)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.chmod(temp, target.stat().st_mode & 0o7777)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    _sync_directory(target.parent)
    return target


def write_new_file(directory: Path, stem: str, suffix: str, text: str) -> Path:
    """Write ``text`` to a file that did not exist: ``stem + suffix``, else ``stem (2)
    + suffix``, ``(3)``… Never overwrites, even when another process creates the same name
    meanwhile (the finished temp file is hard-linked to the name, which fails if it
    exists). Returns the path written."""
    data = text.encode("utf-8")
    temp = _write_temp(directory, stem + suffix, data)
    try:
        number = 1
        while True:
            name = f"{stem}{suffix}" if number == 1 else f"{stem} ({number}){suffix}"
            target = directory / name
            try:
                os.link(temp, target)
            except FileExistsError:
                number += 1
                continue
            except OSError:  # no hard links here (FAT, some network shares)
                if target.exists() or target.is_symlink():
                    number += 1
                    continue
                os.replace(temp, target)
            break
    finally:
        with contextlib.suppress(OSError):
            temp.unlink()
    _sync_directory(directory)
    return target
