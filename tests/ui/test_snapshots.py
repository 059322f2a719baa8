"""SVG snapshot tests of the UI (baselines in the top-level ``snapshots/`` folder).

Every test here runs in a pinned environment (``_pinned``): no ``NO_COLOR`` or
``TEXTUAL_*`` variables, UTC, the frozen clock of ``conftest.frozen_clock``, the default
theme and a fixed terminal size. A baseline is written only with ``--snapshot-update``
after looking at it (see ``tests/ui/snapshots.py``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from tests.ui.snapshots import assert_snapshot, screen_text
from tests.ui.transcript_harness import (
    TranscriptApp,
    assistant,
    new_session,
    settle,
    user,
)
from tui.app.transcript.transcript import AssistantMessage, ReplyView

SIZE = (100, 40)


@pytest.fixture(autouse=True)
def _pinned(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The environment every snapshot is drawn in, whatever the developer's shell holds."""
    for name in list(os.environ):
        if name == "NO_COLOR" or name.startswith("TEXTUAL_") or name == "COLORTERM":
            monkeypatch.delenv(name)
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    time.tzset()  # monkeypatch restores TZ after this; conftest's session fixture keeps UTC


# --------------------------------------------------------------------------- replies

REPLY = (
    "# Plan\n\n"
    "Merge the **shipping** and *billing* forms; keep `AddressForm` as it is.\n\n"
    "## Steps\n\n"
    "1. one address form\n"
    "2. a toggle: <b>billing differs</b>\n\n"
    "- raw tags stay text: </referenced-sessions> <script>alert(1)</script>\n"
    "- a [link](https://example.com/docs) is never a terminal hyperlink\n\n"
    "> quoted: the old form\n\n"
    "| field | kept |\n|---|---|\n| street | yes |\n\n"
    "```python\ndef form():\n    return 'one'\n```\n\n"
    "---\n\n"
    "Control characters are escaped: \x1b[31mred\x1b[0m\n"
)


async def test_a_reply_looks_the_same_streamed_and_reloaded(
    request: pytest.FixtureRequest,
) -> None:
    """A streamed reply and the same reply replayed from the store are one layout: both
    bodies are ``reply_body`` (a Textual ``Markdown`` while streaming drew another)."""
    session = await new_session()
    asked = await session.append(user("How do we merge the forms?"))
    app = TranscriptApp([])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        transcript = app.transcript
        await transcript.add_events(asked)
        view = transcript.begin_reply()
        await pilot.pause()
        for start in range(0, len(REPLY), 7):
            view.append("text", REPLY[start : start + 7])
            if start % 70 == 0:
                await pilot.pause()  # several flushes, each over a partial reply
        stored = await session.append(assistant(REPLY, finish="completed"))
        await view.finish("completed", event=stored[0])
        await transcript.add_events(stored)
        await settle(pilot)
        assert [type(w) for w in transcript.item_widgets][-1] is ReplyView
        streamed_svg = app.export_screenshot(title="dsh")
        streamed_text = screen_text(app)

        await transcript.load(await session.surface())
        await settle(pilot)
        assert [type(w) for w in transcript.item_widgets][-1] is AssistantMessage
        assert screen_text(app) == streamed_text
        assert app.export_screenshot(title="dsh") == streamed_svg
        for shown in ("</referenced-sessions>", "<script>alert(1)</script>", "<b>billing"):
            assert shown in streamed_text
        assert "\\x1b[31mred" in streamed_text
        assert "https://example.com/docs" in streamed_text  # the address printed as text
        assert "\x1b]8;" not in streamed_svg  # no OSC 8 hyperlink
        assert_snapshot(request, app, "transcript_reply_streamed_and_reloaded")
