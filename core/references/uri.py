"""Session-reference URIs (SPEC §4.1): ``dsh-session:`` + base64url of the JS-JSON of the id.

JSON-encoding first makes every Python ``str`` representable, as JavaScript sees it: a
surrogate pair is its astral character (written raw), each unpaired surrogate is escaped on
its own, so the payload is always valid UTF-8 and decodes back. A payload holding an escaped
pair decodes to the character, which re-encodes raw: not canonical, as the reference says.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Final

from core.jsoncodec import JSONDecodeError, dumps_js, loads_exact
from core.references.config import SESSION_REFERENCE_INVALID_REFERENCE, SessionReferenceError

__all__ = [
    "SESSION_REFERENCE_SCHEME",
    "decode_session_reference_uri",
    "encode_session_reference_uri",
]

SESSION_REFERENCE_SCHEME: Final = "dsh-session:"

_PAYLOAD = re.compile(r"[A-Za-z0-9_-]+")


def encode_session_reference_uri(session_id: str) -> str:
    """The canonical URI of ``session_id`` (any ``str``, lone surrogates included; a pair
    in it is its character, SPEC §4.1)."""
    if not isinstance(session_id, str):
        raise SessionReferenceError(
            f"a session id must be a str, got {type(session_id).__name__}",
            SESSION_REFERENCE_INVALID_REFERENCE,
        )
    payload = base64.urlsafe_b64encode(dumps_js(session_id).encode("utf-8"))
    return SESSION_REFERENCE_SCHEME + payload.rstrip(b"=").decode("ascii")


def _invalid(uri: object, why: str) -> SessionReferenceError:
    shown = repr(uri) if len(repr(uri)) <= 80 else repr(uri)[:77] + "..."
    return SessionReferenceError(
        f"invalid session reference {shown}: {why}", SESSION_REFERENCE_INVALID_REFERENCE
    )


def decode_session_reference_uri(uri: str) -> str:
    """The session id of a canonical URI; anything else raises ``INVALID_REFERENCE``."""
    if not isinstance(uri, str):
        raise _invalid(uri, "not a str")
    if not uri.startswith(SESSION_REFERENCE_SCHEME):
        raise _invalid(uri, f"it does not start with {SESSION_REFERENCE_SCHEME!r}")
    payload = uri[len(SESSION_REFERENCE_SCHEME) :]
    if _PAYLOAD.fullmatch(payload) is None:
        raise _invalid(uri, "the payload must be non-empty unpadded base64url")
    try:
        raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
        value = loads_exact(raw.decode("utf-8"), frozen=False)
    except (binascii.Error, UnicodeDecodeError, JSONDecodeError, ValueError) as err:
        raise _invalid(uri, "the payload is not base64url of a UTF-8 JSON string") from err
    if not isinstance(value, str):
        raise _invalid(uri, "the payload is not a JSON string")
    if encode_session_reference_uri(value) != uri:
        raise _invalid(uri, "it is not in canonical form")
    return value
