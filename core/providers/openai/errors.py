"""A server's failure in words a user can read: the human part of an error body (secrets
redacted, one line, bounded), ``Retry-After``, attempts."""

from __future__ import annotations

import email.utils
import json
import re
import time
from typing import Final

import httpx

from core.secrets import redact

_MESSAGE_LIMIT: Final = 300
_WHITESPACE: Final = re.compile(r"\s+")


async def _read_limited(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """At most ``limit`` bytes of the body, and whether that was all of it."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            return bytes(body[:limit]), False
    return bytes(body), True


def _server_message(raw: bytes | str) -> str:
    """The human part of an error body: ``error.message`` and friends, else short plain text."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = None
    message: object = None
    if isinstance(value, dict):
        error = value.get("error")
        if isinstance(error, dict):
            message = error.get("message") or error.get("code")
        elif isinstance(error, str):
            message = error
        if not message:
            message = value.get("message") or value.get("detail")
    elif value is None and not text.lstrip().startswith("<"):
        message = text  # plain text, not an HTML error page
    if not isinstance(message, str):
        return ""
    return _one_line(message)


def _one_line(text: str) -> str:
    """Secrets redacted (before any cut, so no part of one survives), one line, bounded."""
    text = _WHITESPACE.sub(" ", redact(text)).strip()
    if len(text) > _MESSAGE_LIMIT:
        text = text[: _MESSAGE_LIMIT - 1].rstrip() + "…"
    return text


def _retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds: delta-seconds (decimals tolerated) or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _after(attempt: int) -> str:
    return f" after {attempt} attempts" if attempt > 1 else ""


def _describe(err: BaseException) -> str:
    return str(err) or type(err).__name__
