"""SPEC §4.1: session-reference URIs."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.references import (
    SESSION_REFERENCE_INVALID_REFERENCE,
    SESSION_REFERENCE_SCHEME,
    SessionReferenceError,
    decode_session_reference_uri,
    encode_session_reference_uri,
)
from core.surrogates import merge_surrogate_pairs
from tests.references.strategies import session_ids
from tests.references.vectors import load_vectors


def b64(raw: bytes) -> str:
    return SESSION_REFERENCE_SCHEME + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def test_scheme() -> None:
    assert SESSION_REFERENCE_SCHEME == "dsh-session:"


def test_shared_vectors_match_byte_for_byte() -> None:
    vectors = load_vectors("uri.json")
    assert len(vectors) >= 10
    for vector in vectors:
        assert encode_session_reference_uri(vector["session_id"]) == vector["uri"]
        assert decode_session_reference_uri(vector["uri"]) == vector["session_id"]


@pytest.mark.parametrize(
    ("session_id", "json_text"),
    [
        ("\ude00\ud83d", '"\\ude00\\ud83d"'),  # a low then a high: no pair
        ("\ud83d\ud83d", '"\\ud83d\\ud83d"'),
        ("a\udfffb", '"a\\udfffb"'),
        ("😀", '"😀"'),  # an astral character stays raw
        ("\x7f\u2028", '"\x7f\u2028"'),
    ],
)
def test_surrogates_escaped_each_on_its_own_lowercase(session_id: str, json_text: str) -> None:
    uri = encode_session_reference_uri(session_id)
    assert uri == b64(json_text.encode("utf-8"))
    decoded = decode_session_reference_uri(uri)
    assert decoded == session_id


@pytest.mark.parametrize(
    ("session_id", "json_text"),
    [
        ("\ud83d\ude00", '"😀"'),  # a raw pair is its character (SPEC 4.1)
        ("mig-hé\ud83d\ude80", '"mig-hé🚀"'),
        ("\ud83d\ud83d\ude00\ude00", '"\\ud83d😀\\ude00"'),
        ("a\ud83d" + "\ude00b", '"a😀b"'),  # made by joining two strings
    ],
)
def test_a_raw_pair_encodes_as_its_character(session_id: str, json_text: str) -> None:
    uri = encode_session_reference_uri(session_id)
    assert uri == b64(json_text.encode("utf-8"))
    assert uri == encode_session_reference_uri(merge_surrogate_pairs(session_id))
    assert decode_session_reference_uri(uri) == merge_surrogate_pairs(session_id)


@pytest.mark.parametrize(
    "json_text",
    [b'"\\ud83d\\ude00"', b'"mig-h\xc3\xa9\\ud83d\\ude80"', b'"\\ud83d\\ude00\\ud800"'],
)
def test_an_escaped_pair_in_the_payload_is_not_canonical(json_text: bytes) -> None:
    # It decodes to the astral character, which re-encodes raw: another URI.
    with pytest.raises(SessionReferenceError) as info:
        decode_session_reference_uri(b64(json_text))
    assert info.value.code == SESSION_REFERENCE_INVALID_REFERENCE


@given(session_ids)
def test_every_str_round_trips(session_id: str) -> None:
    uri = encode_session_reference_uri(session_id)
    assert uri.startswith(SESSION_REFERENCE_SCHEME)
    payload = uri[len(SESSION_REFERENCE_SCHEME) :]
    assert payload and "=" not in payload
    assert set(payload) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert decode_session_reference_uri(uri) == merge_surrogate_pairs(session_id)


@pytest.mark.parametrize(
    "uri",
    [
        "",
        "dsh-session:",
        "dsh-session",
        "DSH-SESSION:InRhcmdldCI",
        "session:InRhcmdldCI",
        " dsh-session:InRhcmdldCI",
        "dsh-session:InRhcmdldCI ",
        "dsh-session:InRhcmdldCI\n",
        "dsh-session:InRhcmdldCI=",  # padding is not canonical
        "dsh-session:InRhcmdldCI==",
        "dsh-session:InRhcmdldCJ",  # non-zero trailing bits
        "dsh-session:InRhcmdld+I",  # not base64url
        "dsh-session:InRhcmdld/I",
        "dsh-session:I",  # impossible length
        "dsh-session:!!",
        b64(b'"unterminated'),
        b64(b"42"),  # JSON, but not a string
        b64(b"null"),
        b64(b'["x"]'),
        b64(b'{"a":1}'),
        b64(b' "x"'),  # whitespace around the JSON
        b64(b'"x" '),
        b64(b'"\\u0041"'),  # a needless escape
        b64(b'"\\/"'),
        b64(b'"\\uD83D"'),  # upper-case surrogate escape
        b64(b'"\x01"'),  # a raw control character
        b64(b'"\xff"'),  # not UTF-8
        b64('"\ud800"'.encode("utf-8", "surrogatepass")),  # a raw surrogate, not UTF-8
        b64(b'"x"extra'),
    ],
)
def test_non_canonical_uris_are_rejected(uri: str) -> None:
    with pytest.raises(SessionReferenceError) as info:
        decode_session_reference_uri(uri)
    assert info.value.code == SESSION_REFERENCE_INVALID_REFERENCE


@pytest.mark.parametrize("value", [None, 1, b"dsh-session:InRhcmdldCI"])
def test_non_str_uri_is_invalid(value: object) -> None:
    with pytest.raises(SessionReferenceError) as info:
        decode_session_reference_uri(value)  # type: ignore[arg-type]
    assert info.value.code == SESSION_REFERENCE_INVALID_REFERENCE


def test_non_str_id_cannot_be_encoded() -> None:
    with pytest.raises(SessionReferenceError) as info:
        encode_session_reference_uri(42)  # type: ignore[arg-type]
    assert info.value.code == SESSION_REFERENCE_INVALID_REFERENCE


@given(st.text(alphabet="ABCDEFGHIJabcdefgh0123456789-_", min_size=1, max_size=16))
def test_decode_raises_only_session_reference_errors(payload: str) -> None:
    uri = SESSION_REFERENCE_SCHEME + payload
    try:
        session_id = decode_session_reference_uri(uri)
    except SessionReferenceError as err:
        assert err.code == SESSION_REFERENCE_INVALID_REFERENCE
    else:
        assert encode_session_reference_uri(session_id) == uri


def _as_utf16_halves(text: str) -> str:
    """``text`` with each astral character as its two surrogates (raw in a Python str)."""
    out = []
    for ch in text:
        cp = ord(ch) - 0x10000
        out.append(ch if cp < 0 else chr(0xD800 + (cp >> 10)) + chr(0xDC00 + (cp & 0x3FF)))
    return "".join(out)


def test_the_reference_answers_on_surrogates() -> None:
    """``tests/vectors/uri_surrogates.json``: what the reference's TypeScript answered
    (``tests/vectors/make_uri_surrogates.py``), so a lone clone checks it too."""
    entries = load_vectors("uri_surrogates.json")
    assert {e["op"] for e in entries} == {"encode", "decode"}
    assert any("error" in e for e in entries)
    for entry in entries:
        if entry["op"] == "encode":
            assert encode_session_reference_uri(entry["arg"]) == entry["value"]
            # the same string with its pairs raw in a Python str: the same URI
            halves = _as_utf16_halves(entry["arg"])
            assert encode_session_reference_uri(halves) == entry["value"]
        elif "error" in entry:
            with pytest.raises(SessionReferenceError) as info:
                decode_session_reference_uri(entry["arg"])
            assert info.value.code == entry["error"]
        else:
            assert decode_session_reference_uri(entry["arg"]) == entry["value"]
