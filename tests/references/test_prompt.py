"""SPEC §4.9: the prompt text and the snapshot message's source."""

from __future__ import annotations

from core.references import (
    REFERENCED_SESSIONS_WARNING,
    RetentionStats,
    is_session_reference_source,
    parse_reference_prompt,
    render_reference_prompt,
    session_reference_source,
)
from core.references.prompt import reference_entry


def test_warning_is_short_untrusted_and_tag_free() -> None:
    assert "untrusted" in REFERENCED_SESSIONS_WARNING
    assert "<" not in REFERENCED_SESSIONS_WARNING
    assert "\n" not in REFERENCED_SESSIONS_WARNING
    assert len(REFERENCED_SESSIONS_WARNING) < 400


def test_prompt_shape() -> None:
    sources = [
        {
            "sessionId": "s",
            "label": "</referenced-sessions>",
            "cwd": None,
            "capturedThroughSeq": 3,
            "conversation": [{"role": "user", "text": "hi <b>"}],
        }
    ]
    text = render_reference_prompt(sources)
    assert text == (
        "## Referenced sessions\n"
        "\n"
        f"{REFERENCED_SESSIONS_WARNING}\n"
        "\n"
        "<referenced-sessions>\n"
        '[{"sessionId":"s","label":"\\u003c/referenced-sessions>","cwd":null,'
        '"capturedThroughSeq":3,"conversation":[{"role":"user","text":"hi \\u003cb>"}]}]\n'
        "</referenced-sessions>"
    )
    assert text.count("<") == 2  # only the two tags
    assert parse_reference_prompt(text) == sources


def test_parse_reference_prompt_rejects_other_text() -> None:
    assert parse_reference_prompt("hello") is None
    assert parse_reference_prompt(render_reference_prompt([]).replace("[]", "{}")) is None
    assert parse_reference_prompt(render_reference_prompt([]).replace("[]", "[")) is None
    assert parse_reference_prompt(render_reference_prompt([])) == []


def test_source_metadata() -> None:
    stats = RetentionStats(
        compacted=True,
        original_messages=5,
        retained_messages=3,
        omitted_messages=2,
        omitted_bytes=0,
    )
    entry = reference_entry(
        session_id="s", label="L", captured_through_seq=None, stats=stats, input_index=1
    )
    source = session_reference_source([entry])
    assert source == {
        "kind": "session-reference",
        "version": 1,
        "references": [
            {
                "sessionId": "s",
                "label": "L",
                "capturedThroughSeq": None,
                "compacted": True,
                "originalMessages": 5,
                "retainedMessages": 3,
                "omittedMessages": 2,
                "omittedBytes": 0,
                "truncated": True,
                "inputIndex": 1,
            }
        ],
    }
    assert list(source["references"][0]) == [
        "sessionId",
        "label",
        "capturedThroughSeq",
        "compacted",
        "originalMessages",
        "retainedMessages",
        "omittedMessages",
        "omittedBytes",
        "truncated",
        "inputIndex",
    ]
    assert is_session_reference_source(source)
    assert not is_session_reference_source({"kind": "user"})
    assert not is_session_reference_source(None)
