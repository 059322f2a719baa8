"""The reader's face (the ``ForeignFormat`` of ``core.importers.foreign``): which files
are Codex rollouts, where they are, and their sessions, one file one session."""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from core.importers.codex.names import _time_from_name
from core.importers.codex.rollout import _ENVELOPE_TYPES, _Reader
from core.importers.codex.values import _is_bare_meta, _message
from core.importers.foreign import SNIFF_BYTES, ForeignImportError, ForeignSession
from core.importers.source import decompressed_chunks, log_lines, open_regular_file
from core.jsoncodec import loads_exact
from core.logfile import LogImportError

_ROLLOUT_NAME = re.compile(r"rollout-.*\.jsonl?(?:\.zst)?")
_HEAD_ENVELOPE = re.compile(
    rb'\A\s*\{\s*(?:"timestamp"\s*:\s*"[^"\\]{0,64}"\s*,\s*)?"type"\s*:\s*"session_meta"'
)
_DOCUMENT = re.compile(rb'\A\s*\{\s*"session"\s*:\s*\{')


# --------------------------------------------------------------------------- the face


def default_root() -> Path | None:
    """``$CODEX_HOME/sessions`` (``~/.codex/sessions`` when ``CODEX_HOME`` is unset)."""
    home = os.environ.get("CODEX_HOME")
    return (Path(home) if home else Path.home() / ".codex") / "sessions"


def sniff(path: Path, head: bytes) -> bool:
    """A rollout starts with a ``session_meta`` envelope, or (before September 2025) with a
    bare session meta ``{"id", "timestamp", …}``, or (spring 2025) is a JSON document
    ``{"session": {…}, …}``; a file named ``rollout-*.jsonl`` may also start with another
    envelope (a trimmed file). Never true of dsh's, the reference's,
    Claude Code's or ChatGPT's files (their first lines have other types or shapes)."""
    if _DOCUMENT.match(head):
        return True  # the first Codex's one JSON document
    end = head.find(b"\n")
    first = head if end < 0 else head[:end]
    if not first.strip():
        return False
    try:
        obj = loads_exact(first.decode("utf-8"), frozen=False)
    except (UnicodeDecodeError, ValueError, RecursionError):
        # a first line longer than the head: its opening keys still say what it is
        return end < 0 and _HEAD_ENVELOPE.match(first) is not None
    if not isinstance(obj, dict):
        return False
    kind = obj.get("type")
    if kind == "session_meta":
        return isinstance(obj.get("payload"), dict)
    if kind is None:
        return _is_bare_meta(obj)
    named = _ROLLOUT_NAME.fullmatch(path.name) is not None
    return named and kind in _ENVELOPE_TYPES and isinstance(obj.get("payload"), dict)


def find_files(root: Path) -> list[Path]:
    """Every ``rollout-*.jsonl`` (and ``rollout-*.json``) under ``root``, and any other
    ``*.jsonl`` or ``*.json`` whose start ``sniff`` recognises; sorted, symbolic links
    neither followed nor listed."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        base = Path(folder)
        for name in files:
            path = base / name
            if path.is_symlink() or not name.endswith((".jsonl", ".json", ".jsonl.zst")):
                continue
            if _ROLLOUT_NAME.fullmatch(name) or _sniff_file(path):
                found.append(path)
    return sorted(found)


def read_sessions(paths: Sequence[Path]) -> Iterator[ForeignSession | ForeignImportError]:
    """One session per file, in the order given; a file that cannot be read is a
    ``ForeignImportError`` in its place."""
    for path in paths:
        try:
            yield read_file(path)
        except ForeignImportError as err:
            yield err


def read_file(path: Path) -> ForeignSession:
    """The session of one rollout file, or ``ForeignImportError`` naming the file and line."""
    try:
        file = open_regular_file(path)
    except OSError as err:
        raise ForeignImportError(path, f"cannot read the file: {err.strerror or err}") from err
    with file:
        reader = _Reader(path, name_time=_time_from_name(path))
        try:
            chunks = decompressed_chunks(file)
            first = next(chunks, b"")
            if _DOCUMENT.match(first):
                reader.document(first, chunks)
            else:
                for line in log_lines(itertools.chain((first,), chunks)):
                    reader.line(line.number, line.text, line.ended)
        except LogImportError as err:
            if isinstance(err, ForeignImportError):
                raise
            raise ForeignImportError(path, _message(err), err.line, reader.session_id) from err
        except OSError as err:
            raise ForeignImportError(path, f"cannot read the file: {err}") from err
        return reader.finish()


# --------------------------------------------------------------------------- reading


def _sniff_file(path: Path) -> bool:
    try:
        with open_regular_file(path) as file:
            return sniff(path, file.read(SNIFF_BYTES))
    except OSError:
        return False
