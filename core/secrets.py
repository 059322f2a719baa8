"""Secrets (API keys, URL credentials) and the one function that scrubs them from text.

A key lives in a ``Secret`` whose ``repr``/``str`` never show it, so a traceback that prints
frame locals, a log record or a debugger shows ``Secret('***')``. Every ``Secret`` made in
this process is remembered here so that ``redact`` can scrub any text that is about to leave
it (an error line, a stored error, a log record, an ACP error) without the key being threaded
through every caller. ``redact`` also hides credentials written into URLs (``user:pass@`` and
query values such as ``?api-key=…``), whoever wrote them.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final
from urllib.parse import quote, unquote

from core.config import ConfigError

__all__ = [
    "REDACTED",
    "RedactingFilter",
    "Secret",
    "api_key_from_env",
    "clean_api_key",
    "install_log_redaction",
    "redact",
    "redact_url",
]

REDACTED: Final = "***"

# Query parameters that are configuration, not credentials (kept readable in URLs).
_PUBLIC_PARAMS: Final = frozenset({"api-version", "api_version"})
_URL: Final = re.compile(r"(?i)\b[a-z][a-z0-9+.\-]*://[^\s'\"<>]*")
_USERINFO: Final = re.compile(r"(?i)^([a-z][a-z0-9+.\-]*://)[^/?#@]*@")
_QUERY_VALUE: Final = re.compile(r"([?&;])([^=&#;]*)=([^&#;]*)")
# Printable ASCII only: what an HTTP header value can carry without surprises.
_KEY_CHARS: Final = re.compile(r"[\x20-\x7e]*")

_known: dict[str, None] = {}  # every form of every secret, longest first once sorted
_forms_sorted: list[str] = []


class Secret:
    """A string that does not show itself: ``reveal()`` is the only way to read it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not isinstance(value, str) or not value:
            raise ValueError("a secret is a non-empty string")
        self._value = value
        _remember(value)

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret({REDACTED!r})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash((Secret, self._value))

    def __reduce__(self) -> str | tuple[Any, ...]:
        raise TypeError("a Secret cannot be pickled")


def _forms(value: str) -> set[str]:
    """Every way ``value`` may be spelled in text: raw, repr, JSON, escaped, percent-encoded."""
    forms = {
        value,
        repr(value)[1:-1],
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        value.encode("unicode_escape").decode("ascii"),
        repr(value.encode("utf-8", "surrogatepass"))[2:-1],
        quote(value, safe=""),
        quote(value),
    }
    return {form for form in forms if form}


def _remember(value: str) -> None:
    global _forms_sorted
    new = _forms(value) - _known.keys()
    if new:
        for form in new:
            _known[form] = None
        _forms_sorted = sorted(_known, key=len, reverse=True)


def redact(text: str, secrets: Iterable[Secret | str] = ()) -> str:
    """``text`` with every known secret (in any spelling) and URL credential replaced by ***.

    The one redaction used everywhere: provider errors, stored errors, log records, crashes.
    """
    for extra in secrets:
        _remember(extra.reveal() if isinstance(extra, Secret) else extra)
    for form in _forms_sorted:
        if form in text:
            text = text.replace(form, REDACTED)
    if "://" in text:
        text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    return text


def redact_url(url: str) -> str:
    """``url`` without its user-info and with its query values hidden (``api-version`` kept)."""
    url = _USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", url)
    return _QUERY_VALUE.sub(_hide_value, url)


def _hide_value(match: re.Match[str]) -> str:
    sep, name, value = match.groups()
    if unquote(name).lower() in _PUBLIC_PARAMS or not value or value == REDACTED:
        return match.group(0)
    return f"{sep}{name}={REDACTED}"


def url_secrets(url: str) -> list[str]:
    """The credentials written into ``url`` (user-info parts, query values), to remember."""
    found: list[str] = []
    match = re.match(r"(?i)^[a-z][a-z0-9+.\-]*://([^/?#@]*)@", url)
    if match:
        for part in match.group(1).split(":", 1):
            if part:
                found += [part, unquote(part)]
    query = url.partition("?")[2].partition("#")[0]
    for item in re.split("[&;]", query):
        name, eq, value = item.partition("=")
        if eq and value and unquote(name).lower() not in _PUBLIC_PARAMS:
            found += [value, unquote(value)]
    return [f for f in found if len(f) >= 4]  # a 1–3 character "secret" would redact words


def clean_api_key(value: str | None, variable: str) -> Secret | None:
    """The key without surrounding whitespace; ``None`` when empty.

    Anything but printable ASCII left inside is a ``ConfigError`` naming ``variable`` (never
    the value): an HTTP header cannot carry it, and retrying would not help.
    """
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    if not _KEY_CHARS.fullmatch(value):
        Secret(value)  # remembered, so that no later text can show it
        raise ConfigError(
            f"{variable} holds a control or non-ASCII character inside the key "
            "(the value is not shown); set it again without it"
        )
    return Secret(value)


def api_key_from_env(env: Mapping[str, str], variable: str) -> Secret | None:
    """The API key named by ``variable`` in ``env``, cleaned by ``clean_api_key``."""
    return clean_api_key(env.get(variable), variable)


class RedactingFilter(logging.Filter):
    """Scrubs every log record it sees with ``redact`` (message, arguments and traceback)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: keep the raw text, scrubbed
            message = str(record.msg)
        clean = redact(message)
        if clean != message or record.args:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


_FILTERED_LOGGERS: Final = ("httpx", "httpcore", "httpcore.connection", "httpcore.http11")


def install_log_redaction() -> None:
    """Attach a ``RedactingFilter`` to the HTTP client's loggers (once; idempotent).

    httpx logs each request's full URL at INFO, credentials included.
    """
    for name in _FILTERED_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactingFilter) for f in logger.filters):
            logger.addFilter(RedactingFilter())
