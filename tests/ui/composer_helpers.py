"""What the composer's and the ``@`` picker's Pilot tests share (``test_composer``,
``test_composer_picker``): typing, settling, reading the screen and the picker, and the
``world`` fixture (imported by each test module as ``world as world``)."""

from __future__ import annotations

import pytest
from textual.pilot import Pilot

from core.references import SessionReferenceInput, format_session_reference_mention
from tests.ui.composer_harness import ComposerHarness, World, make_world
from tests.ui.conftest import workers_done
from tui.app.composer.composer import Composer

SIZE = (100, 30)

_KEY_NAMES = {" ": "space", "\n": "ctrl+j", "@": "at"}


async def type_text(pilot: Pilot[None], text: str) -> None:
    """Type ``text`` key by key (space and newline by their key names)."""
    await pilot.press(*(_KEY_NAMES.get(char, char) for char in text))


async def settle(pilot: Pilot[None]) -> None:
    """Let lookups finish and messages and the screen catch up."""
    await workers_done(pilot.app)
    await pilot.pause()


def screen_text(pilot_app: ComposerHarness) -> str:
    """The screenshot SVG with non-breaking spaces turned back into spaces."""
    return pilot_app.export_screenshot().replace("&#160;", " ")


def is_open(composer: Composer) -> bool:
    """A call, so that mypy does not narrow the property between key presses."""
    return composer.picker_open


def labels(composer: Composer) -> list[str]:
    return [candidate.label for candidate in composer.picker.candidates]


def mention_for(world_id: str, label: str) -> str:
    return format_session_reference_mention(SessionReferenceInput(world_id, label))


@pytest.fixture
async def world() -> World:
    return await make_world()
