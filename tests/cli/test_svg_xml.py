"""SVG output is well-formed XML whatever the texts and the file name hold (issue 31 point
5): every character XML 1.0 forbids (C0 controls but tab, LF and CR; lone surrogates;
U+FFFE and U+FFFF) is shown escaped, on screen as in the SVG, never written raw."""

from __future__ import annotations

import asyncio
import os
import re
import xml.dom.minidom
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.text import Text

from core.display import escape_control, mask_control, single_line
from core.log import SESSION_TITLE, assistant_message, user_message
from core.logfile import export_jsonl
from stores import MemorySessionStore
from tests.cli.conftest import Run
from tests.cli.test_replay import svg_text
from tui.app.screenshot import xml_safe

pytestmark = pytest.mark.timeout(120)

# One of each class XML 1.0 forbids, and the neighbours it allows.
FORBIDDEN = "\x00\x01\x08\x0b\x0c\x0e\x1b\x1f\ud800\udbff\udc00\udfff\ufffe\uffff"
XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def well_formed(svg: str) -> None:
    ET.fromstring(svg)
    xml.dom.minidom.parseString(svg.encode("utf-8"))


def write_log(path: Path) -> Path:
    async def lines() -> list[str]:
        store = MemorySessionStore()
        await store.create_session("odd" + FORBIDDEN)
        sid = "odd" + FORBIDDEN
        await store.append(
            sid, SESSION_TITLE, {"title": "T" + FORBIDDEN, "source": {"kind": "user"}}
        )
        await store.append(
            sid, "user/message", user_message("ask" + FORBIDDEN), surface_op="append"
        )
        reply = assistant_message(
            "answer" + FORBIDDEN + "\n```\ncode" + FORBIDDEN + "\n```", provider="p", model="m"
        )
        await store.append(
            sid, "assistant/message", {"turn": 0, "step": 0, "message": reply}, surface_op="append"
        )
        header = await store.read_header(sid)
        return list(export_jsonl(header, await store.read_events(sid)))

    # The name holds C0 controls, U+FFFE/U+FFFF and a byte that is not UTF-8 (a lone
    # surrogate in Python's str).
    name = os.fsencode("log\x01\x1b\ufffe\uffff") + b"\xff.jsonl"
    target = Path(os.fsdecode(os.path.join(os.fsencode(path), name)))
    target.write_text("".join(line + "\n" for line in asyncio.run(lines())), encoding="utf-8")
    return target


def test_replay_svg_is_well_formed_xml_with_every_forbidden_character(
    dsh: Run, tmp_path: Path
) -> None:
    log = write_log(tmp_path)
    out = tmp_path / "out.svg"
    result = dsh("replay", str(log), "--svg", str(out), "--size", "120x40")
    assert result.code == 0, result.err
    svg = out.read_text(encoding="utf-8")
    assert not XML_FORBIDDEN.search(svg)
    well_formed(svg)
    text = svg_text(svg)
    # Shown escaped as the terminal shows them (core.display), the texts around intact.
    for shown in ("\\ufffe", "\\uffff", "\\ud800", "\\x1b", "\\x01"):
        assert shown in text, shown
    assert "ask" in text and "answer" in text and "eplay of" in text


def test_the_screen_rule_escapes_what_xml_forbids() -> None:
    for char in FORBIDDEN:
        for shown in (escape_control(char), single_line(char), mask_control(char)):
            assert not XML_FORBIDDEN.search(shown), (hex(ord(char)), shown)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_any_text_makes_well_formed_svg(text: str) -> None:
    # What the screen shows of it (the display rule) and, as the last line of defence,
    # whatever a widget might print raw: both come out as well-formed SVG.
    for shown in (escape_control(text), text):
        console = Console(width=40, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
        console.print(Text(shown))
        svg = xml_safe(console.export_svg(title=text))
        well_formed(svg)
        console.file.close()


@settings(max_examples=15, deadline=None)
@given(st.text(st.sampled_from(FORBIDDEN + "a \n"), min_size=1, max_size=20) | st.text(min_size=1))
def test_the_screen_itself_holds_nothing_xml_forbids(text: str) -> None:
    """Textual's own SVG (no ``xml_safe``) of a transcript showing arbitrary text: the
    display rule alone keeps it well-formed, so the terminal gets no such character."""
    from core.log import build_event
    from tests.ui.transcript_harness import TranscriptApp, settle

    events = [
        build_event(0, "user/message", 1, user_message(text), "append"),
        build_event(1, "odd/event", 2, {"t": text}, None),
    ]

    async def render() -> str:
        app = TranscriptApp(events)
        async with app.run_test(size=(60, 12)) as pilot:
            await settle(pilot)
            return app.export_screenshot(title="t")

    well_formed(asyncio.run(render()))
