"""ChatGPT data exports read into dsh sessions (issue 33): the ``ForeignFormat`` of
``core.importers.foreign`` for ``conversations.json`` and the export's ``.zip``.

An export's ``conversations.json`` is ONE JSON document: an array of conversations,
compact or pretty-printed, that may be gigabytes long. It is never parsed whole: a small
scanner (``split_array``) finds each top-level element's byte span (strings and their
escapes respected, line breaks counted) and each conversation is parsed alone with
``loads_exact``, so memory is bounded by one conversation (``MAX_CONVERSATION_BYTES``).
A conversation that does not parse, is too large, nests too deeply or has a field of the
wrong type is a ``ForeignImportError`` naming the file and its line, and the others still
come; a file whose array structure is lost (cut short, or no ``,`` between two
conversations) ends with one error there, after the conversations read before it.

A ``.zip`` is read in place, never extracted: its ``conversations.json`` (the member of
that name nearest the archive's root; member paths are never used for anything else,
nested archives are not opened) is decompressed as a stream, refused beforehand when the
archive's directory, the member's declared size or its compression ratio is out of bounds,
and stopped should it decompress to more than it declared.

A conversation (``{"id"|"conversation_id", "title", "create_time", "current_node",
"mapping": {node id: {"id", "message", "parent", "children"}}, …}``) becomes one session:

* the surface is the ``current_node`` branch: its parent links walked up to the root, then
  reversed (an export without ``current_node`` takes the leaf written last, and one whose
  nodes have no links at all is read in the mapping's order);
* every other node (another branch, the empty root, a hidden system message
  (``is_visually_hidden_from_conversation``), an empty system message, a content type dsh
  has no place for, a tool output answering no call) is a log-only ``chatgpt/node`` event
  holding the node as it is but its ``children`` (the other nodes' ``parent`` says them);
  the conversation's own fields but those that change as it goes on (``_VOLATILE``:
  ``mapping``, ``title``, ``update_time``, ``current_node``…) are one log-only
  ``chatgpt/conversation`` event first. Log order: depth first from the root, a node's
  other branches before the child on the current branch. So a conversation that went on
  since the last import reads to the events it read to then, and its new ones after
  (what ``dsh import`` needs to add only those); one whose earlier branch changed does
  not, and is reported;
* ``author.role`` ``user`` → a person's message; a visible non-empty ``system`` message →
  an injected one (``{"kind": "plugin", "plugin": "chatgpt"}``); ``assistant`` → a model's
  reply (``metadata.model_slug`` its model), or a ``tool-call`` block when it is addressed
  to a tool (``recipient`` other than ``all``, e.g. ``python`` for code interpreter);
  ``tool`` → the ``tool/result`` of the latest unanswered call to that tool (to the latest
  call, when it gives no name);
* content: ``text`` and ``multimodal_text`` parts joined by line breaks (an image or other
  non-text part as a placeholder such as ``[image]``), ``code`` and ``execution_output``
  their text, ``thoughts`` and ``reasoning_recap`` as ``reasoning`` blocks; a tool's
  ``system_error`` its output as an error;
* times (float seconds) become epoch milliseconds; a node without one takes the previous
  event's; the title is the conversation's ``title``.
"""

from __future__ import annotations

import os
import re
import zipfile
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO

from core.errors import InvalidEventError
from core.importers import bounds
from core.importers.foreign import (
    SNIFF_BYTES,
    ForeignImportError,
    ForeignSession,
    ForeignTool,
    Provenance,
    json_kind,
)
from core.importers.source import NotRegularFileError, open_regular_file
from core.jsoncodec import JSONDecodeError, dumps_js, loads_exact, utf8_len
from core.limits import MAX_JSON_DEPTH, MAX_TITLE_BYTES, check_header_limits
from core.log import (
    ASSISTANT_MESSAGE,
    TOOL_RESULT,
    USER_MESSAGE,
    NewEvent,
    validate_new_event,
)
from core.timestamps import MAX_EPOCH_MS

__all__ = [
    "CONVERSATION_EVENT",
    "MAX_CONVERSATION_BYTES",
    "MAX_FAILED_IN_A_ROW",
    "MAX_ZIP_MEMBER_BYTES",
    "MAX_ZIP_RATIO",
    "NODE_EVENT",
    "TOOL",
    "Element",
    "RefusedExportError",
    "default_root",
    "find_files",
    "read_sessions",
    "sniff",
    "split_array",
]

TOOL: ForeignTool = "chatgpt"
NODE_EVENT = "chatgpt/node"
"""A log-only event holding a node of the conversation that is not on the surface."""
CONVERSATION_EVENT = "chatgpt/conversation"
"""A log-only event holding the conversation's fields but its ``mapping``."""

MAX_CONVERSATION_BYTES = bounds.MAX_LOG_LINE_BYTES
"""One conversation's JSON (64 MiB, what one event of a dsh log may be): it is held whole
while read. Real conversations are at most a few MB (text; images are files beside it in
the export), and no string longer than this could be imported in one event anyway."""
MAX_FAILED_IN_A_ROW = 1000
"""Conversations in a row that cannot be read before the rest of the file is given up:
a file of millions of damaged ones is not an export, and not a million error lines."""
MAX_ZIP_MEMBER_BYTES = bounds.MAX_LOG_BYTES
"""The most ``conversations.json`` may decompress to from a ``.zip`` (4 GiB)."""
MAX_ZIP_RATIO = 100
"""The most a ``conversations.json`` over ``_RATIO_FLOOR`` may be compressed (JSON text
deflates 5 to 20 times; a zip bomb a thousand)."""
_RATIO_FLOOR = 16 * 1024**2
_MAX_ZIP_ENTRIES = 1_000_000
_MAX_ZIP_DIRECTORY = 256 * 1024**2
_MEMBER = "conversations.json"
_READ = 1 << 20
_SHRINK = 8 * _READ
_BOM = b"\xef\xbb\xbf"
_WS = b" \t\r\n"
_ZIP_MAGIC = b"PK\x03\x04"
_EMPTY_ZIP_MAGIC = b"PK\x05\x06"
_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_BRACKET = re.compile(rb"[\[\]{}]")
_FIRST_WINDOW = 1024
_LAST_WINDOW = 256 * 1024
_SCALAR_END = re.compile(rb"[,\]\s]")
_NOT_WS = re.compile(rb"[^ \t\r\n]")
# The rest of a string's text up to its closing quote or the end of the buffer (where a
# lone backslash is left for the next read).
_STRING_REST = re.compile(rb'[^"\\]*+(?:\\.[^"\\]*+)*+', re.DOTALL)
_PROVIDER = "openai"
# The conversation's fields that change as it goes on, left out of its log-only event so
# that a conversation that went on reads to the same first events (its title is the
# session's title; its nodes are the other events).
_VOLATILE = frozenset(
    {
        "mapping",
        "title",
        "update_time",
        "current_node",
        "is_archived",
        "is_starred",
        "moderation_results",
        "safe_urls",
        "blocked_urls",
    }
)
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    EOFError,
    OSError,
    ValueError,
    NotImplementedError,
    RuntimeError,
)


# --------------------------------------------------------------------------- the face


def sniff(path: Path, head: bytes) -> bool:
    """A ChatGPT export: a JSON array whose first conversation has a ``mapping`` (or any
    array, for a file named ``conversations.json``), or a ``.zip`` holding one. No other
    tool's log nor dsh's starts with ``[``, and none is a zip."""
    if head.startswith((_ZIP_MAGIC, _EMPTY_ZIP_MAGIC)):
        try:
            with _open_zip(path) as (_archive, _member):
                return True
        except RefusedExportError:
            return True  # an export all the same: reading it says why it is refused
        except (ForeignImportError, *_ZIP_ERRORS):
            return False
    text = head.removeprefix(_BOM).lstrip(_WS)
    if not text.startswith(b"["):
        return False
    rest = text[1:].lstrip(_WS)
    if path.name == _MEMBER and (not rest or rest[:1] in b"{]"):
        return True
    return rest.startswith(b"{") and b'"mapping"' in head


def default_root() -> Path | None:
    """ChatGPT keeps no sessions on this machine: an export is imported by its path."""
    return None


def find_files(root: Path) -> list[Path]:
    """The exports under ``root``: ``.json`` and ``.zip`` files that ``sniff`` takes,
    symlinks (files or folders) not followed."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        for name in files:
            if not name.endswith((".json", ".zip")):
                continue
            path = Path(folder) / name
            if path.is_symlink():
                continue
            try:
                with open_regular_file(path) as file:
                    head = file.read(SNIFF_BYTES)
            except OSError:
                continue
            if sniff(path, head):
                found.append(path)
    return sorted(found)


def read_sessions(paths: Sequence[Path]) -> Iterator[ForeignSession | ForeignImportError]:
    """Each conversation of each export in ``paths``, one at a time; a conversation or file
    that cannot be read is a ``ForeignImportError`` in its place."""
    for path in paths:
        yield from _read_file(path)


# --------------------------------------------------------------------------- files


def _read_file(path: Path) -> Iterator[ForeignSession | ForeignImportError]:
    name = os.fspath(path)
    try:
        file = open_regular_file(path)
    except NotRegularFileError as err:
        yield ForeignImportError(name, f"cannot read it: {err.strerror}")
        return
    except OSError as err:
        yield ForeignImportError(name, f"cannot read it: {err.strerror or err}")
        return
    with file:
        head = file.read(len(_ZIP_MAGIC))
        if head.startswith(_ZIP_MAGIC) or head == _EMPTY_ZIP_MAGIC:
            try:
                with _open_zip(file) as (archive, member), archive.open(member) as stream:
                    yield from _read_export(name, _zip_chunks(stream, member))
            except ForeignImportError as err:
                yield ForeignImportError(name, str(err), err.line, err.original_id)
            except _ZIP_ERRORS as err:
                yield ForeignImportError(
                    name, f"not a readable zip archive: {err or type(err).__name__}"
                )
            return
        yield from _read_export(name, _file_chunks(file, head))


def _file_chunks(file: BinaryIO, head: bytes) -> Iterator[bytes]:
    if head:
        yield head
    while chunk := file.read(_READ):
        yield chunk


class _ZipGuard:
    """The archive and its member, closed together (with the file, when opened here)."""

    def __init__(
        self, archive: zipfile.ZipFile, member: zipfile.ZipInfo, owned: BinaryIO | None
    ) -> None:
        self.archive, self.member, self.owned = archive, member, owned

    def __enter__(self) -> tuple[zipfile.ZipFile, zipfile.ZipInfo]:
        return self.archive, self.member

    def __exit__(self, *exc: object) -> None:
        self.archive.close()
        if self.owned is not None:
            self.owned.close()


class RefusedExportError(ForeignImportError):
    """A zip archive holding a ``conversations.json`` that dsh refuses to read (encrypted,
    too large, a zip bomb): an export all the same, so ``sniff`` takes it and the
    import says why, instead of judging the file by another format."""


def _open_zip(source: Path | BinaryIO) -> _ZipGuard:
    """The archive and its ``conversations.json``, checked before anything is
    decompressed: ``ForeignImportError`` for a directory too large, no such member, an
    encrypted one, a declared size or compression ratio out of bounds."""
    owned = open_regular_file(source) if isinstance(source, Path) else None
    file = owned if owned is not None else source
    assert not isinstance(file, Path)
    name = os.fspath(source) if isinstance(source, Path) else ""
    try:
        _check_directory(file, name)
        try:
            archive = zipfile.ZipFile(file)
        except _ZIP_ERRORS as err:
            raise ForeignImportError(
                name, f"not a readable zip archive: {err or type(err).__name__}"
            ) from err
        try:
            member = _member(archive, name)
        except BaseException:
            archive.close()
            raise
    except BaseException:
        if owned is not None:
            owned.close()
        raise
    return _ZipGuard(archive, member, owned)


def _check_directory(file: BinaryIO, name: str) -> None:
    """Refuse an archive whose central directory (read whole by ``zipfile``) is huge."""
    end_record = getattr(zipfile, "_EndRecData", None)
    if end_record is None:  # pragma: no cover - every CPython 3.11+ has it
        return
    record = end_record(file)
    if record is None:
        raise ForeignImportError(name, "not a zip archive (no end of central directory)")
    entries = record[zipfile._ECD_ENTRIES_TOTAL]  # type: ignore[attr-defined]
    size = record[zipfile._ECD_SIZE]  # type: ignore[attr-defined]
    if entries > _MAX_ZIP_ENTRIES or size > _MAX_ZIP_DIRECTORY:
        raise ForeignImportError(
            name,
            f"the zip archive lists {entries:,} entries in {size:,} bytes, more than dsh "
            f"reads ({_MAX_ZIP_ENTRIES:,} entries, {_MAX_ZIP_DIRECTORY:,} bytes)",
        )


def _member(archive: zipfile.ZipFile, name: str) -> zipfile.ZipInfo:
    candidates = [
        info
        for info in archive.infolist()
        if not info.is_dir() and info.filename.rsplit("/", 1)[-1] == _MEMBER
    ]
    if not candidates:
        raise ForeignImportError(name, f"the zip archive holds no {_MEMBER}")
    member = min(candidates, key=lambda info: (info.filename.count("/"), info.filename))
    if member.flag_bits & 0x1:
        raise RefusedExportError(name, f"{_MEMBER} is encrypted in the zip archive")
    declared, packed = member.file_size, member.compress_size
    if declared > MAX_ZIP_MEMBER_BYTES:
        raise RefusedExportError(
            name,
            f"{_MEMBER} would decompress to {declared:,} bytes, more than the "
            f"{MAX_ZIP_MEMBER_BYTES:,} dsh reads",
        )
    if declared > _RATIO_FLOOR and declared > MAX_ZIP_RATIO * max(packed, 1):
        raise RefusedExportError(
            name,
            f"{_MEMBER} is compressed {declared // max(packed, 1):,} to 1, more than the "
            f"{MAX_ZIP_RATIO} to 1 of any real export: refused as a zip bomb",
        )
    return member


def _zip_chunks(stream: IO[bytes], member: zipfile.ZipInfo) -> Iterator[bytes]:
    """The member's bytes, stopped past its declared size (``zipfile`` already stops
    there; this does not rely on it)."""
    total = 0
    while True:
        try:
            chunk = stream.read(_READ)
        except _ZIP_ERRORS as err:
            raise _SourceError(f"the zip archive is damaged: {err or type(err).__name__}") from err
        if not chunk:
            return
        total += len(chunk)
        if total > member.file_size:
            raise _SourceError(
                f"{_MEMBER} decompresses to more than the {member.file_size:,} bytes it "
                "declares: refused as a zip bomb"
            )
        yield chunk


class _SourceError(Exception):
    """The bytes of the export could not be read further (a damaged archive)."""


# --------------------------------------------------------------------------- the array


@dataclass(slots=True)
class Element:
    """One top-level element of the array: its first line and its text, or what is
    wrong with it (``problem``, with the line it is about) when it was not kept. (Not
    frozen: its reader takes the text out, so that it is not held while the parsed
    conversation is.)"""

    line: int
    text: str
    problem: str | None = None
    problem_line: int = 0


class _Buffer:
    """The bytes read and not yet consumed, with their offset and line."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks = chunks
        self.buf = bytearray()
        self.lines = 0  # line breaks before buf[0]
        self.eof = False

    def more(self) -> bool:
        while not self.eof:
            chunk = next(self.chunks, None)
            if chunk is None:
                self.eof = True
            elif chunk:
                self.buf += chunk
                return True
        return False

    def drop(self, upto: int) -> None:
        self.lines += self.buf.count(b"\n", 0, upto)
        del self.buf[:upto]
        if upto > _SHRINK and len(self.buf) < upto:  # give a large element's memory back
            self.buf = bytearray(self.buf)

    def text(self, end: int) -> tuple[str, int | None]:
        """``buf[:end]`` decoded (without a copy of its bytes), and the index of the
        first byte that is not UTF-8 (``None`` when all are)."""
        with memoryview(self.buf) as view, view[:end] as part:
            try:
                return str(part, "utf-8"), None
            except UnicodeDecodeError as err:
                return "", err.start

    def line(self, at: int) -> int:
        return self.lines + self.buf.count(b"\n", 0, at) + 1

    def skip_ws(self, at: int) -> int:
        """The index of the first non-whitespace byte from ``at`` (``len(buf)`` at the
        end of the input). Whitespace read past is dropped, so a flood of it costs no
        memory (indexes before ``at`` are then no longer valid)."""
        while True:
            found = _NOT_WS.search(self.buf, at)
            if found is not None:
                return found.start()
            self.drop(len(self.buf))
            at = 0
            if not self.more():
                return 0


class _StructureError(Exception):
    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


def split_array(chunks: Iterator[bytes]) -> Iterator[Element]:
    """The elements of the JSON array the ``chunks`` hold, one at a time, each at most
    ``MAX_CONVERSATION_BYTES`` (a longer one, or one nesting deeper than
    ``MAX_JSON_DEPTH`` levels, is skipped and given as a problem). Where the array's own
    structure is broken (not an array, cut short, two elements without a comma) it
    raises ``_StructureError`` with the line, after the elements before."""
    reader = _Buffer(chunks)
    at = reader.skip_ws(0)
    if reader.buf.startswith(_BOM):
        at = reader.skip_ws(len(_BOM))
    if at >= len(reader.buf):
        raise _StructureError("the file is empty: expected a JSON array of conversations", 1)
    if reader.buf[at] != ord("["):
        raise _StructureError(
            "not a ChatGPT export: expected a JSON array of conversations", reader.line(at)
        )
    at = reader.skip_ws(at + 1)
    first = True
    while True:
        if at >= len(reader.buf):
            raise _StructureError(
                "the file ends inside the array of conversations (it was cut short)",
                reader.line(at),
            )
        if reader.buf[at] == ord("]") and first:
            break
        reader.drop(at)
        element = _scan_element(reader)
        yield element
        at = reader.skip_ws(0)
        if at >= len(reader.buf):
            raise _StructureError(
                "the file ends after a conversation, without the array's closing ]",
                reader.line(at),
            )
        byte = reader.buf[at]
        if byte == ord("]"):
            break
        if byte != ord(","):
            raise _StructureError(
                "expected , or ] after the conversation that starts on line "
                f"{element.line}; the rest of the file cannot be read",
                reader.line(at),
            )
        at = reader.skip_ws(at + 1)
        first = False
    at = reader.skip_ws(at + 1)
    if at < len(reader.buf):
        raise _StructureError("data after the array of conversations", reader.line(at))


class _Scan:
    """One element being scanned from ``reader.buf[0]``: once it is given up (too long,
    too deep) its bytes are forgotten as they are scanned, so memory stays bounded."""

    def __init__(self, reader: _Buffer) -> None:
        self.reader = reader
        self.problem: str | None = None
        self.problem_line = 0

    def give_up(self, message: str, where: int | None) -> None:
        """Stop keeping the element; ``where``: the index the problem is at (``None``: the
        element as a whole, named by its first line)."""
        if self.problem is None:
            self.problem = message
            self.problem_line = 0 if where is None else self.reader.line(where)

    def check_size(self) -> None:
        if len(self.reader.buf) > MAX_CONVERSATION_BYTES:
            self.give_up(
                f"the conversation is longer than {MAX_CONVERSATION_BYTES:,} bytes, the most "
                "dsh reads",
                None,
            )

    def spill(self, keep: int) -> int:
        """Forget the element's bytes before ``keep`` once it was given up; the new index
        of ``keep``."""
        if self.problem is None or keep == 0:
            return keep
        self.reader.drop(keep)
        return 0

    def element(self, line: int) -> Element:
        reader = self.reader
        end = self.string_end(1) if reader.buf[0] == ord('"') else self.container_end()
        if end < 0:
            raise _StructureError(
                f"the file ends inside the conversation that starts on line {line} (it was "
                "cut short)",
                reader.line(len(reader.buf)),
            )
        if self.problem is None and end > MAX_CONVERSATION_BYTES:
            self.check_size()
        text = ""
        if self.problem is None:
            text, bad = reader.text(end)
            if bad is not None:
                self.give_up("the conversation is not valid UTF-8", bad)
        reader.drop(end)
        return Element(line, text, self.problem, self.problem_line)

    def container_end(self) -> int:
        """The index just past the object or array at ``buf[0]``, or -1 at the end of the
        input. Read a window at a time with the work per byte done in C: escape pairs
        blanked (``_ESCAPE``), the window split at its quotes (alternately outside and
        inside a string), the brackets outside strings kept (``_NOT_BRACKET``); only the
        brackets are counted in Python, and only the window the element ends in is walked
        part by part to find its last byte. Windows start small and grow, so that a small
        element costs about its size."""
        reader = self.reader
        depth = 0
        at = 0  # the next byte to read: never inside an escape pair
        in_string = False
        size = _FIRST_WINDOW
        while True:
            buf = reader.buf
            window = bytes(buf[at : at + size])
            blanked = _ESCAPE.sub(b"__", window)
            if blanked.endswith(b"\\"):  # an escape the window cuts: read with its byte
                window, blanked = window[:-1], blanked[:-1]
            if not window:  # the end of what was read
                at = self.spill(at)
                if self.problem is None:
                    self.check_size()
                    at = self.spill(at)
                if not reader.more():
                    return -1
                continue
            parts = blanked.split(b'"')
            outside = parts[1::2] if in_string else parts[0::2]
            brackets = b"".join(outside).translate(None, _NOT_BRACKET)
            for index, byte in enumerate(brackets):
                if byte == 0x5B or byte == 0x7B:  # [ {
                    depth += 1
                    if depth > MAX_JSON_DEPTH and self.problem is None:
                        where = at + _bracket_at(parts, in_string, index)
                        self.give_up(
                            f"the conversation nests deeper than {MAX_JSON_DEPTH} levels", where
                        )
                else:
                    depth -= 1
                    if depth == 0:
                        return at + _bracket_at(parts, in_string, index) + 1
            in_string ^= len(parts) % 2 == 0  # the window holds an odd number of quotes
            at += len(window)
            size = min(size * 2, _LAST_WINDOW)

    def string_end(self, at: int) -> int:
        """The index just past the string whose text starts at ``at``, or -1 at the end of
        the input. Read forward only, in C: each byte is looked at once (a backslash the
        buffer ends in waits for the byte it escapes)."""
        reader = self.reader
        while True:
            buf = reader.buf
            match = _STRING_REST.match(buf, at)
            assert match is not None  # it matches the empty string
            at = match.end()
            if at < len(buf) and buf[at] == ord('"'):
                return at + 1
            if self.problem is None:
                self.check_size()
            at = self.spill(at)
            if not reader.more():
                return -1


def _bracket_at(parts: list[bytes], in_string: bool, index: int) -> int:
    """Where in a window (split at its quotes into ``parts``, the first inside a string
    when ``in_string``) the ``index``-th bracket outside strings is."""
    offset = 0
    for number, part in enumerate(parts):
        if (number % 2 == 1) == in_string:  # outside a string
            count = len(part.translate(None, _NOT_BRACKET))
            if index < count:
                for found, match in enumerate(_BRACKET.finditer(part)):
                    if found == index:
                        return offset + match.start()
            index -= count
        offset += len(part) + 1  # and its quote
    raise AssertionError("no such bracket")  # pragma: no cover - brackets were counted


def _scan_element(reader: _Buffer) -> Element:
    """The element starting at ``reader.buf[0]``, consumed from the buffer."""
    line = reader.line(0)
    if reader.buf[0] not in b'{["':
        return _scan_scalar(reader, line)
    return _Scan(reader).element(line)


def _scan_scalar(reader: _Buffer, line: int) -> Element:
    at = 0
    while True:
        match = _SCALAR_END.search(reader.buf, at)
        if match is not None:
            end = match.start()
            break
        at = len(reader.buf)
        if at > 1024 or not reader.more():
            end = at
            break
    text, bad = reader.text(end)
    reader.drop(end)
    if bad is not None:
        return Element(line, "", "the conversation is not valid UTF-8", line)
    return Element(line, text)


# --------------------------------------------------------------------------- conversations


class _Bad(Exception):
    """What is wrong with one conversation."""


def _read_export(
    file: str, chunks: Iterator[bytes]
) -> Iterator[ForeignSession | ForeignImportError]:
    elements = split_array(chunks)
    failed = 0  # conversations in a row that could not be read
    while True:
        try:
            element = next(elements, None)
        except _StructureError as err:
            yield ForeignImportError(file, str(err), err.line)
            return
        except _SourceError as err:
            yield ForeignImportError(file, str(err))
            return
        if element is None:
            return
        result = _conversation(file, element)
        yield result
        failed = failed + 1 if isinstance(result, ForeignImportError) else 0
        if failed >= MAX_FAILED_IN_A_ROW:
            yield ForeignImportError(
                file,
                f"{failed:,} conversations in a row could not be read: the rest of the file "
                "is not read (it is not a ChatGPT export, or it is badly damaged)",
                element.line,
            )
            return


def _conversation(file: str, element: Element) -> ForeignSession | ForeignImportError:
    if element.problem is not None:
        return ForeignImportError(file, element.problem, element.problem_line or element.line)
    text, element.text = element.text, ""
    try:
        value = loads_exact(text, unique_keys=True)
    except (JSONDecodeError, ValueError, RecursionError) as err:
        pos = getattr(err, "pos", None)
        line = element.line + (text.count("\n", 0, pos) if isinstance(pos, int) else 0)
        message = getattr(err, "msg", str(err))
        return ForeignImportError(file, f"the conversation is not valid JSON: {message}", line)
    del text
    original_id = _original_id(value)
    try:
        return _session(file, value)
    except _Bad as err:
        return ForeignImportError(file, f"{_named(original_id)}{err}", element.line, original_id)
    except InvalidEventError as err:
        return ForeignImportError(file, f"{_named(original_id)}{err}", element.line, original_id)


def _named(original_id: str | None) -> str:
    if original_id is None:
        return ""
    shown = original_id if len(original_id) <= 80 else original_id[:79] + "…"
    return f"conversation {shown!r}: "


def _original_id(value: Any) -> str | None:
    if not isinstance(value, dict):
        return None
    for key in ("id", "conversation_id"):
        found = value.get(key)
        if isinstance(found, str) and found:
            return found
    return None


def _epoch_ms(value: Any, what: str) -> int | None:
    """Float seconds (``create_time``) as epoch milliseconds; ``None`` for null."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Bad(f"{what} must be a number of seconds, not {json_kind(value)}")
    if value != value or value < 0 or value * 1000 > MAX_EPOCH_MS:
        raise _Bad(f"{what} {value!r} is out of range (seconds since 1970, before year 10000)")
    return round(value * 1000)


def _clip_title(title: str) -> str:
    if utf8_len(title) <= MAX_TITLE_BYTES:
        return title
    data = title.encode("utf-8", "surrogatepass")[: MAX_TITLE_BYTES - 3]
    while data and data[-1] & 0xC0 == 0x80:
        data = data[:-1]
    if data and data[-1] >= 0xC0:
        data = data[:-1]
    return data.decode("utf-8", "surrogatepass") + "…"


@dataclass(slots=True)
class _Node:
    key: str
    record: dict[str, Any]
    message: dict[str, Any] | None
    parent: str | None
    time: int | None


def _nodes(mapping: Any) -> dict[str, _Node]:
    if not isinstance(mapping, dict):
        raise _Bad(f"mapping must be an object of nodes, not {json_kind(mapping)}")
    nodes: dict[str, _Node] = {}
    for key, record in mapping.items():
        shown = key if len(key) <= 80 else key[:79] + "…"
        if not isinstance(record, dict):
            raise _Bad(f"node {shown!r} must be an object, not {json_kind(record)}")
        message = record.get("message")
        if message is not None and not isinstance(message, dict):
            raise _Bad(f"node {shown!r}: message must be an object, not {json_kind(message)}")
        parent = record.get("parent")
        if parent is not None and not isinstance(parent, str):
            raise _Bad(f"node {shown!r}: parent must be a node id, not {json_kind(parent)}")
        children = record.get("children", [])
        if children is not None and not (
            isinstance(children, list) and all(isinstance(c, str) for c in children)
        ):
            raise _Bad(f"node {shown!r}: children must be a list of node ids")
        time = None
        if message is not None:
            time = _epoch_ms(message.get("create_time"), f"node {shown!r}: create_time")
        nodes[key] = _Node(key, record, message, parent, time)
    return nodes


def _branch(conversation: dict[str, Any], nodes: dict[str, _Node]) -> list[str]:
    """The current branch, root first."""
    current = conversation.get("current_node")
    if current is not None and not isinstance(current, str):
        raise _Bad(f"current_node must be a node id, not {json_kind(current)}")
    if current is not None and current not in nodes:
        shown = current if len(current) <= 80 else current[:79] + "…"
        raise _Bad(f"current_node {shown!r} is not a node of the mapping")
    if current is None:
        if not nodes:
            return []
        linked = any(
            node.parent is not None or node.record.get("children") for node in nodes.values()
        )
        if not linked:  # a hand-written sample: the mapping's order is the conversation
            return list(nodes)
        parents = {node.parent for node in nodes.values()}
        leaves = [key for key in nodes if key not in parents]
        if not leaves:
            raise _Bad("the nodes' parent links form a cycle and there is no current_node")

        def written(key: str) -> int:
            time = nodes[key].time
            return -1 if time is None else time

        current = max(reversed(leaves), key=written)
    branch: list[str] = []
    seen: set[str] = set()
    key: str | None = current
    while key is not None and key in nodes:
        if key in seen:
            raise _Bad("the parent links of the current branch form a cycle")
        seen.add(key)
        branch.append(key)
        key = nodes[key].parent
    branch.reverse()
    return branch


def _log_order(nodes: dict[str, _Node], branch: list[str]) -> list[str]:
    """Every node once: depth first from the branch's root (then the other roots, then
    nodes no root reaches), a node's other children before its child on the branch."""
    children: dict[str, list[str]] = {}
    roots: list[str] = []
    for key, node in nodes.items():
        if node.parent is not None and node.parent in nodes and node.parent != key:
            children.setdefault(node.parent, []).append(key)
        else:
            roots.append(key)
    on_branch = set(branch)
    if branch:
        roots.remove(branch[0])
        roots.insert(0, branch[0])
    order: list[str] = []
    seen: set[str] = set()
    for start in [*roots, *nodes]:
        if start in seen:
            continue
        stack = [start]
        while stack:
            key = stack.pop()
            if key in seen:
                continue
            seen.add(key)
            order.append(key)
            kids = children.get(key, [])
            stack.extend(k for k in kids if k in on_branch)
            stack.extend(reversed([k for k in kids if k not in on_branch]))
    return order


def _session(file: str, conversation: Any) -> ForeignSession:
    if not isinstance(conversation, dict):
        raise _Bad(f"a conversation must be a JSON object, not {json_kind(conversation)}")
    original_id = _original_id(conversation)
    if original_id is None:
        raise _Bad("the conversation has no id (neither id nor conversation_id is a string)")
    check_header_limits(original_id, None)
    if "mapping" not in conversation:
        raise _Bad("the conversation has no mapping of messages")
    nodes = _nodes(conversation["mapping"])
    branch = _branch(conversation, nodes)
    created_at = _epoch_ms(conversation.get("create_time"), "create_time")
    if created_at is None:
        times = [node.time for node in nodes.values() if node.time is not None]
        created_at = min(times) if times else None
    if created_at is None:
        created_at = _epoch_ms(conversation.get("update_time"), "update_time") or 0
    title = conversation.get("title")
    if title is not None and not isinstance(title, str):
        raise _Bad(f"title must be a string, not {json_kind(title)}")
    default_model = conversation.get("default_model_slug")
    builder = _Builder(created_at, default_model if isinstance(default_model, str) else None)
    builder.log(CONVERSATION_EVENT, {k: v for k, v in conversation.items() if k not in _VOLATILE})
    on_branch = set(branch)
    for key in _log_order(nodes, branch):
        node = nodes[key]
        if key not in on_branch or not builder.surface(node):
            record = {k: v for k, v in node.record.items() if k != "children"}
            builder.log(NODE_EVENT, record, node.time)
    if len(builder.events) > bounds.MAX_IMPORT_EVENTS:
        raise _Bad(f"the conversation holds more than {bounds.MAX_IMPORT_EVENTS:,} events")
    return ForeignSession(
        provenance=Provenance(TOOL, file, original_id),
        created_at=created_at,
        cwd=None,
        title=_clip_title(title) if title else None,
        events=builder.events,
        files=(file,),
    )


@dataclass(slots=True)
class _Call:
    id: str
    name: str
    turn: int
    step: int


class _Builder:
    """The session's events in log order, with the turn and step counters."""

    def __init__(self, created_at: int, default_model: str | None) -> None:
        self.events: list[NewEvent] = []
        self.time = created_at
        self.default_model = default_model
        self.people = 0  # the person's messages so far
        self.step = -1  # of the model's last reply in this turn
        self.pending: list[_Call] = []

    @property
    def turn(self) -> int:
        return max(self.people - 1, 0)

    def _add(self, type: str, data: dict[str, Any], time: int | None, surface: bool) -> None:
        if time is not None:
            self.time = time
        op = "append" if surface else None
        valid = validate_new_event(type, data, op, None, self.time)
        self.events.append(NewEvent(valid.type, valid.data, valid.surface_op, None, valid.time))

    def log(self, type: str, data: dict[str, Any], time: int | None = None) -> None:
        self._add(type, data, time, surface=False)

    def surface(self, node: _Node) -> bool:
        """Add ``node`` to the surface when it has a place there; False when not."""
        message = node.message
        if message is None:
            return False
        metadata = message.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        if metadata.get("is_visually_hidden_from_conversation") is True:
            return False
        author = message.get("author")
        role = author.get("role") if isinstance(author, dict) else None
        content = message.get("content")
        if not isinstance(content, dict):
            return False
        kind = content.get("content_type")
        message_id = message.get("id")
        if not isinstance(message_id, str) or not message_id:
            message_id = node.key
        if role == "user" or role == "system":
            if kind == "code":
                code = content.get("text")
                text = code if isinstance(code, str) else ""
            elif kind in ("text", "multimodal_text", None):
                text = _parts_text(content)
            else:
                return False
            if not text:
                return False
            if role == "user":
                self.people += 1
                self.step = -1
                self.pending.clear()
            source = {"kind": "user"} if role == "user" else {"kind": "plugin", "plugin": TOOL}
            data = {"id": message_id, "role": "user", "content": [_text(text)], "source": source}
            self._add(USER_MESSAGE, data, node.time, surface=True)
            return True
        if role == "assistant":
            return self._assistant(node, message, content, kind, message_id, metadata)
        if role == "tool":
            return self._tool(node, message, content, kind, message_id, author)
        return False

    def _assistant(
        self,
        node: _Node,
        message: dict[str, Any],
        content: dict[str, Any],
        kind: Any,
        message_id: str,
        metadata: dict[str, Any],
    ) -> bool:
        recipient = message.get("recipient", "all")
        blocks: list[dict[str, Any]]
        if isinstance(recipient, str) and recipient not in ("all", ""):
            if kind == "code":
                code = content.get("text")
                if not isinstance(code, str):
                    return False
                arguments = {"code": code}
            elif kind in ("text", "multimodal_text"):
                arguments = {"input": _parts_text(content)}
            else:
                return False
            blocks = [
                {
                    "type": "tool-call",
                    "id": message_id,
                    "name": recipient,
                    "arguments": dumps_js(arguments),
                }
            ]
        elif kind in ("text", "multimodal_text", None):
            text = _parts_text(content)
            blocks = [_text(text)] if text else []
        elif kind == "code":
            code = content.get("text")
            blocks = [_text(code)] if isinstance(code, str) and code else []
        elif kind == "thoughts":
            blocks = _thoughts(content)
        elif kind == "reasoning_recap":
            recap = content.get("content")
            blocks = (
                [{"type": "reasoning", "text": recap}] if isinstance(recap, str) and recap else []
            )
        else:
            return False
        if not blocks:
            return False
        slug = metadata.get("model_slug")
        model = slug if isinstance(slug, str) and slug else (self.default_model or "unknown")
        self.step += 1
        data = {
            "turn": self.turn,
            "step": self.step,
            "message": {
                "id": message_id,
                "role": "assistant",
                "content": blocks,
                "source": {"kind": "model", "provider": _PROVIDER, "model": model},
            },
        }
        self._add(ASSISTANT_MESSAGE, data, node.time, surface=True)
        if blocks[0]["type"] == "tool-call":
            self.pending.append(_Call(message_id, blocks[0]["name"], self.turn, self.step))
        return True

    def _tool(
        self,
        node: _Node,
        message: dict[str, Any],
        content: dict[str, Any],
        kind: Any,
        message_id: str,
        author: Any,
    ) -> bool:
        name = author.get("name") if isinstance(author, dict) else None
        if isinstance(name, str):
            call = next((c for c in reversed(self.pending) if c.name == name), None)
        else:  # a tool that does not say its name answers the latest call
            call = self.pending[-1] if self.pending else None
        if call is None:
            return False
        if kind in ("execution_output", "code", "system_error"):
            text = content.get("text")
            if not isinstance(text, str):
                return False
        elif kind in ("text", "multimodal_text"):
            text = _parts_text(content)
        elif kind == "tether_browsing_display":
            result = content.get("result")
            if not isinstance(result, str):
                return False
            text = result
        else:
            return False
        self.pending.remove(call)
        metadata = message.get("metadata")
        aggregate = metadata.get("aggregate_result") if isinstance(metadata, dict) else None
        failed = kind == "system_error" or (
            isinstance(aggregate, dict)
            and (
                aggregate.get("status") not in (None, "success")
                or aggregate.get("in_kernel_exception") is not None
            )
        )
        block = {
            "type": "tool-result",
            "toolCallId": call.id,
            "content": [_text(text)],
            "isError": failed,
        }
        data = {
            "turn": call.turn,
            "step": call.step,
            "message": {
                "id": message_id,
                "role": "user",
                "content": [block],
                "source": {"kind": "tool", "callId": call.id},
            },
        }
        self._add(TOOL_RESULT, data, node.time, surface=True)
        return True


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


_PLACEHOLDERS: Mapping[str, str] = {
    "image_asset_pointer": "[image]",
    "audio_asset_pointer": "[audio]",
    "real_time_user_audio_video_asset_pointer": "[audio]",
    "audio_transcription": "",
    "video_container_asset_pointer": "[video]",
}


def _parts_text(content: dict[str, Any]) -> str:
    """The parts of a text or multimodal message joined by line breaks; a part that is
    not text (an image…) as a placeholder, an audio transcription as its text."""
    parts = content.get("parts")
    if not isinstance(parts, list):
        text = content.get("text")
        return text if isinstance(text, str) else ""
    out: list[str] = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, dict):
            kind = part.get("content_type")
            if kind == "audio_transcription" and isinstance(part.get("text"), str):
                out.append(part["text"])
            else:
                shown = kind if isinstance(kind, str) else "attachment"
                out.append(_PLACEHOLDERS.get(shown) or f"[{_safe_kind(shown)}]")
        elif part is not None:
            out.append(f"[{json_kind(part)}]")
    return "\n".join(out)


def _safe_kind(kind: str) -> str:
    """A content type shown in a placeholder: hostile text, so only a short word of it."""
    word = re.sub(r"[^A-Za-z0-9_.-]", "", kind)[:40]
    return word or "attachment"


def _thoughts(content: dict[str, Any]) -> list[dict[str, Any]]:
    thoughts = content.get("thoughts")
    if not isinstance(thoughts, list):
        return []
    blocks: list[dict[str, Any]] = []
    for thought in thoughts:
        if not isinstance(thought, dict):
            continue
        pieces = [thought[k] for k in ("summary", "content") if isinstance(thought.get(k), str)]
        text = "\n".join(p for p in pieces if p)
        if text:
            blocks.append({"type": "reasoning", "text": text})
    return blocks
