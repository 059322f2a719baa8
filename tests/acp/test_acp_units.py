"""The pure pieces of the ACP agent: prompt → draft, commands, cursors, cards, replay."""

from __future__ import annotations

import pytest
from acp import resource_link_block, text_block
from acp.schema import AgentMessageChunk, AgentThoughtChunk, AudioContentBlock, UserMessageChunk

from core.cards import parse_reference_card
from core.log import (
    ASSISTANT_MESSAGE,
    TOOL_RESULT,
    USER_MESSAGE,
    Event,
    SessionHeader,
    assistant_message,
    reasoning_block,
    user_message,
)
from core.log import text_block as log_text
from core.query import SessionTitle
from core.references import (
    SessionReferenceError,
    encode_session_reference_uri,
    parse_session_reference_text,
    session_reference_source,
)
from tui.acp.listing import InvalidCursorError, decode_cursor, encode_cursor, list_page
from tui.acp.prompt import (
    PromptCommand,
    UnsupportedContentError,
    parse_command,
    prompt_to_draft,
)
from tui.acp.replay import card_text, replay_updates
from tui.acp.text import client_text, code_span
from tui.acp.transport import with_details

ODD_ID = "id with \ud800 surrogate, ] and \\ and \n"


def test_resource_links_become_mentions_that_parse_back_to_the_same_reference() -> None:
    uri = encode_session_reference_uri(ODD_ID)
    draft = prompt_to_draft(
        [text_block("compare"), resource_link_block("a ] label \\ x", uri), text_block("?")]
    )
    parsed = parse_session_reference_text(draft)
    assert parsed.text == "compare @a ] label \\ x?"
    assert [(r.session_id, r.label) for r in parsed.references] == [(ODD_ID, "a ] label \\ x")]


def test_link_spacing_and_empty_names_and_other_links() -> None:
    uri = encode_session_reference_uri("s1")
    assert (
        parse_session_reference_text(
            prompt_to_draft([resource_link_block("A", uri), text_block("and more")])
        ).text
        == "@A and more"
    )
    assert (
        parse_session_reference_text(
            prompt_to_draft([text_block("("), resource_link_block("", uri), text_block(")")])
        ).text
        == "(@s1)"
    )
    assert prompt_to_draft([text_block("one "), text_block("two")]) == "one two"
    assert (
        prompt_to_draft([text_block("read"), resource_link_block("f.py", "file:///f.py")])
        == "read [f.py](file:///f.py)"
    )


@pytest.mark.parametrize(
    "uri", ["dsh-session:", "dsh-session:!!", "dsh-session:IiI=", "dsh-session:e30"]
)
def test_a_malformed_session_link_is_an_invalid_reference(uri: str) -> None:
    with pytest.raises(SessionReferenceError) as caught:
        prompt_to_draft([resource_link_block("x", uri)])
    assert caught.value.code == "SESSION_REFERENCE_INVALID_REFERENCE"


def test_unsupported_blocks_are_refused() -> None:
    with pytest.raises(UnsupportedContentError, match="audio"):
        prompt_to_draft([AudioContentBlock(type="audio", data="AA", mime_type="audio/wav")])


@pytest.mark.parametrize(
    ("draft", "command"),
    [
        ("/sessions", PromptCommand("sessions", "")),
        ("  /sessions   cache  design ", PromptCommand("sessions", "cache  design")),
        ("/sessions\nmulti", PromptCommand("sessions", "multi")),
        ("/session", None),
        ("/sessionsx", None),
        ("please /sessions", None),
        ("/compact", None),
    ],
)
def test_parse_command(draft: str, command: PromptCommand | None) -> None:
    assert parse_command(draft) == command


def _header(i: int, created: int, cwd: str | None = "/w") -> SessionHeader:
    return SessionHeader(f"s{i:02}", created, cwd)


def test_cursor_round_trips_any_id_and_rejects_garbage() -> None:
    assert decode_cursor(encode_cursor(17, ODD_ID)) == (17, ODD_ID)
    for bad in ["", "!!!", encode_cursor(17, ODD_ID)[:-3] + "xyz", "WzEsMl0"]:
        with pytest.raises(InvalidCursorError):
            decode_cursor(bad)


def test_pages_follow_list_order_across_ties_and_new_sessions() -> None:
    headers = [_header(i, 100 - i // 3) for i in range(10)]  # ties in threes
    titles = {"s03": SessionTitle("three", 0, 0, {})}
    first = list_page(headers, titles, {}, cwd=None, cursor=None, page_size=4)
    assert [s.session_id for s in first.sessions] == ["s00", "s01", "s02", "s03"]
    assert first.sessions[3].title == "three"
    # A session created meanwhile (newest) does not shift the next page.
    grown = [_header(99, 1000), *headers]
    second = list_page(grown, titles, {}, cwd=None, cursor=first.next_cursor, page_size=4)
    assert [s.session_id for s in second.sessions] == ["s04", "s05", "s06", "s07"]
    last = list_page(grown, titles, {}, cwd=None, cursor=second.next_cursor, page_size=4)
    assert [s.session_id for s in last.sessions] == ["s08", "s09"] and last.next_cursor is None
    exact = list_page(headers[:4], titles, {}, cwd=None, cursor=None, page_size=4)
    assert exact.next_cursor is None


def test_pages_are_ordered_by_last_activity_with_iso_times() -> None:
    headers = [_header(i, 100 - i) for i in range(5)]  # s00 created last
    # s03 and s04 had events later than every creation; s01's last event is older than
    # its own creation (imported logs can say so): its last event is its activity.
    activity = {"s03": 1_700_000_000_500, "s04": 1_700_000_000_000, "s01": 7}
    first = list_page(headers, {}, activity, cwd=None, cursor=None, page_size=3)
    assert [s.session_id for s in first.sessions] == ["s03", "s04", "s00"]
    assert [s.updated_at for s in first.sessions] == [
        "2023-11-14T22:13:20.500Z",
        "2023-11-14T22:13:20.000Z",
        "1970-01-01T00:00:00.100Z",
    ]
    rest = list_page(headers, {}, activity, cwd=None, cursor=first.next_cursor, page_size=3)
    assert [s.session_id for s in rest.sessions] == ["s02", "s01"]
    assert rest.sessions[1].updated_at == "1970-01-01T00:00:00.007Z"
    # A time no calendar can show is left out rather than failing the listing.
    huge = list_page(headers[:1], {}, {"s00": 2**62}, cwd=None, cursor=None)
    assert huge.sessions[0].updated_at is None


def _snapshot_event(seq: int) -> Event:
    prompt = "## Referenced sessions\n\nuntrusted\n\n<referenced-sessions>\n" + (
        '[{"sessionId":"a","label":"Alpha","cwd":null,"capturedThroughSeq":3,'
        '"conversation":[{"role":"user","text":"SECRET BODY"}]}]'
        "\n</referenced-sessions>"
    )
    entry = {
        "sessionId": "a",
        "label": "Alpha\nforged line",
        "capturedThroughSeq": 3,
        "compacted": False,
        "originalMessages": 5,
        "retainedMessages": 1,
        "omittedMessages": 4,
        "omittedBytes": 1234,
        "truncated": True,
        "inputIndex": 0,
    }
    message = user_message([log_text(prompt)], source=session_reference_source([entry]))
    return Event(seq, USER_MESSAGE, 0, message, "append")


def test_card_text_is_one_line_of_labels_and_counts_never_the_json() -> None:
    card = parse_reference_card(_snapshot_event(0).data)
    assert card is not None
    text = card_text(card)
    assert text == (
        "Referenced sessions · Alpha\\nforged line — 1/5 messages kept"
        " · 4 messages omitted (1,234 bytes) · truncated"
    )


def test_replay_maps_the_surface_in_order_and_skips_what_is_not_conversation() -> None:
    snapshot = _snapshot_event(0)
    request = Event(1, USER_MESSAGE, 0, user_message("ask @Alpha"), "append")
    reply = Event(
        2,
        ASSISTANT_MESSAGE,
        0,
        {
            "turn": 1,
            "step": 0,
            "message": assistant_message(
                [reasoning_block("thinking"), log_text("answer \ud800")], provider="p", model="m"
            ),
            "finish": "interrupted",
            "interrupted": True,
        },
        "append",
    )
    tool = Event(
        3,
        TOOL_RESULT,
        0,
        {
            "turn": 1,
            "step": 0,
            "message": user_message("tool out", source={"kind": "tool", "callId": "c"}),
        },
        "append",
    )
    plugin = Event(
        4, USER_MESSAGE, 0, user_message("ctx", source={"kind": "plugin", "plugin": "x"}), "append"
    )
    updates = replay_updates([snapshot, request, reply, tool, plugin])
    assert [type(u) for u in updates] == [
        UserMessageChunk,
        UserMessageChunk,
        AgentThoughtChunk,
        AgentMessageChunk,
    ]
    texts = [u.content.text for u in updates]
    assert texts[0].startswith("Referenced sessions · ") and texts[0].endswith("\n\n")
    assert "SECRET BODY" not in texts[0]
    assert texts[1] == "ask @Alpha"
    assert texts[2] == "thinking"
    assert texts[3] == "answer \ufffd\n\n[interrupted: the reply was stopped]"
    assert updates[0].message_id == snapshot.data["id"]
    assert updates[2].message_id == updates[3].message_id == reply.data["message"]["id"]


def test_text_helpers() -> None:
    assert client_text("a\ud800b") == "a\ufffdb" and client_text("plain") == "plain"
    assert code_span("x") == "`x`"
    assert code_span("a`b") == "``a`b``"
    assert code_span("`x`") == "`` `x` ``"


def test_error_objects_get_details_and_no_control_characters() -> None:
    plain = with_details({"code": -32602, "message": "bad \x1b[31m thing", "data": None})
    assert plain["message"] == "bad \\x1b[31m thing"
    assert plain["data"] == {"details": "bad \\x1b[31m thing"}
    kept = with_details({"code": -32603, "message": "m", "data": {"code": "X", "details": "d"}})
    assert kept["data"] == {"code": "X", "details": "d"}
    scalar = with_details({"code": -32603, "message": "m", "data": 7})
    assert scalar["data"] == {"details": "m", "value": 7}
    validation = with_details(
        {
            "code": -32602,
            "message": "Invalid params",
            "data": {"errors": [{"loc": ["cwd"], "msg": "Field required"}]},
        }
    )
    assert validation["data"]["details"] == "Invalid params: cwd: Field required"
