"""Mention chips: the arithmetic behind showing ``@[label](dsh-session:…)`` as one ``@label`` unit.

The composer's document holds a chip as one *opener* character (from the Supplementary
Private Use Area, one per chip, drawn as ``@``) followed by the chip's label. A
:class:`ChipTable` remembers which full mention each opener stands for, so the document
never holds a URI (nothing to wrap or edit inside), and :meth:`ChipTable.expand` gives back
the exact text to send or save. Chips are found again from the text alone
(:meth:`ChipTable.spans`), so undo/redo and any edit keep working without tracking offsets.

Plain functions and a small class, no Textual: unit-tested in ``tests/ui/test_chips.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.display import single_line
from core.references import find_session_reference_spans

__all__ = ["CHIP_DISPLAY", "Chip", "ChipSpan", "ChipTable", "is_opener", "snap", "widen"]

_FIRST = 0xF0000
_LAST = 0xFFFFD  # Supplementary Private Use Area-A
CHIP_DISPLAY = "@"
"""How an opener is drawn (one cell, like the opener itself)."""
_OPENER = re.compile("[\U000f0000-\U000ffffd]")


def is_opener(char: str) -> bool:
    return len(char) == 1 and _FIRST <= ord(char) <= _LAST


def strip_openers(text: str) -> str:
    """``text`` without any opener character (text from outside never forges a chip)."""
    return _OPENER.sub("", text)


@dataclass(frozen=True)
class Chip:
    """What one opener stands for: the label shown and the full mention sent."""

    label: str
    mention: str


@dataclass(frozen=True)
class ChipSpan:
    """A whole chip in a string: ``text[start:end]`` is the opener and the label."""

    start: int
    end: int
    chip: Chip


class ChipTable:
    """Opener characters handed out by one composer, and the mention each stands for.

    Entries are never removed (undo can bring a deleted chip back); a draft is bounded by
    what a user picks, and the table starts over when the composer does.
    """

    def __init__(self) -> None:
        self._chips: dict[str, Chip] = {}
        self._by_mention: dict[Chip, str] = {}

    def add(self, label: str, mention: str) -> str:
        """The document form of a chip for ``mention`` shown as ``@label``."""
        label = strip_openers(single_line(label)) or "session"
        chip = Chip(label, mention)
        opener = self._by_mention.get(chip)
        if opener is None:
            if len(self._chips) > _LAST - _FIRST:
                return mention  # out of openers: the raw mention still works
            opener = chr(_FIRST + len(self._chips))
            self._chips[opener] = chip
            self._by_mention[chip] = opener
        return opener + label

    def spans(self, text: str) -> list[ChipSpan]:
        """Every intact chip in ``text``, left to right (an opener whose label was cut is not)."""
        out: list[ChipSpan] = []
        for match in _OPENER.finditer(text):
            index = match.start()
            chip = self._chips.get(match.group())
            if chip is None:
                continue
            end = index + 1 + len(chip.label)
            if text[index + 1 : end] == chip.label:
                out.append(ChipSpan(index, end, chip))
        return out

    def expand(self, text: str) -> str:
        """``text`` with each chip replaced by its full mention (the text to send or save).

        A broken chip's opener becomes a plain ``@``; its remaining label stays as typed text.
        """
        if _OPENER.search(text) is None:
            return text
        parts: list[str] = []
        position = 0
        for span in self.spans(text):
            parts.append(self.display(text[position : span.start]))
            parts.append(span.chip.mention)
            position = span.end
        parts.append(self.display(text[position:]))
        return "".join(parts)

    def chipify(self, text: str) -> str:
        """``text`` (from outside: a saved draft, a paste) with each valid one-line mention
        made a chip; opener characters already in it are dropped."""
        text = strip_openers(text)
        if "@[" not in text:
            return text
        parts: list[str] = []
        position = 0
        for span in find_session_reference_spans(text):
            if span.kind != "mention" or not span.valid or span.label is None:
                continue
            if single_line(span.label) != span.label or not span.label:
                continue
            parts.append(text[position : span.start])
            parts.append(self.add(span.label, text[span.start : span.end]))
            position = span.end
        parts.append(text[position:])
        return "".join(parts)

    def display(self, text: str) -> str:
        """``text`` as drawn: every opener is ``@`` (same length, same cells)."""
        return _OPENER.sub(CHIP_DISPLAY, text)


def snap(column: int, spans: list[ChipSpan], *, forward: bool) -> int:
    """``column`` moved out of any chip it is strictly inside: to its end when moving
    forward, else to its start."""
    for span in spans:
        if span.start < column < span.end:
            return span.end if forward else span.start
    return column


def widen(start: int, end: int, spans: list[ChipSpan]) -> tuple[int, int]:
    """The range ``[start, end)`` grown so that it never cuts a chip (an edit takes it whole)."""
    low, high = min(start, end), max(start, end)
    for span in spans:
        if span.start < low < span.end:
            low = span.start
        if span.start < high < span.end:
            high = span.end
    return low, high
