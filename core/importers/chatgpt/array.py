"""The streaming scanner of the export's one JSON array (``split_array``): each top-level
element's text and first line, strings and escapes respected, memory bounded by one
conversation (``MAX_CONVERSATION_BYTES``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from core.importers import bounds
from core.importers.chatgpt.files import _READ
from core.limits import MAX_JSON_DEPTH

MAX_CONVERSATION_BYTES = bounds.MAX_LOG_LINE_BYTES
"""One conversation's JSON (64 MiB, what one event of a dsh log may be): it is held whole
while read. Real conversations are at most a few MB (text; images are files beside it in
the export), and no string longer than this could be imported in one event anyway."""
_SHRINK = 8 * _READ
_BOM = b"\xef\xbb\xbf"
_WS = b" \t\r\n"
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
