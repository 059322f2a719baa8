"""``core.cards.openable_sources``: what a reference card may offer to open (issue 32)."""

from __future__ import annotations

from typing import Any

from core.cards import openable_sources, parse_reference_card
from core.log import user_message


def card_message(references: list[dict[str, Any]]) -> dict[str, Any]:
    source = {"kind": "session-reference", "version": 1, "references": references}
    return user_message("## Referenced sessions\n\n(damaged: no JSON)", source=source)


def test_each_named_session_once_in_card_order() -> None:
    card = parse_reference_card(
        card_message(
            [
                {"sessionId": "b", "label": "first b"},
                {"label": "no id"},
                {"sessionId": "", "label": "empty id"},
                {"sessionId": "a", "label": "A"},
                {"sessionId": "b", "label": "second b"},
                {"sessionId": 7, "label": "not a str"},
            ]
        )
    )
    assert card is not None and len(card.sources) == 6
    assert [(s.session_id, s.label) for s in openable_sources(card)] == [
        ("b", "first b"),
        ("a", "A"),
    ]


def test_a_card_that_names_no_session_offers_nothing() -> None:
    card = parse_reference_card(card_message([]))
    assert card is not None and openable_sources(card) == ()
