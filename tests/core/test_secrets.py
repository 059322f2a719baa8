"""``core.secrets``: a key never shows itself, and ``redact`` hides every spelling of it."""

from __future__ import annotations

import io
import json
import logging
import pickle

import pytest

from core.config import ConfigError
from core.secrets import (
    REDACTED,
    RedactingFilter,
    Secret,
    api_key_from_env,
    clean_api_key,
    redact,
    redact_url,
)


def test_secret_never_shows_its_value() -> None:
    secret = Secret("sk-never-shown-123")
    for shown in (repr(secret), str(secret), f"{secret}", repr([secret]), repr({"k": secret})):
        assert "sk-never-shown-123" not in shown
    assert secret.reveal() == "sk-never-shown-123"
    with pytest.raises(TypeError):
        pickle.dumps(secret)


def test_redact_covers_every_spelling_of_a_key() -> None:
    value = 'sk-odd"quote\\slash-é-9f8e7d'
    Secret(value)
    spellings = [
        value,
        repr(value),
        json.dumps(value),
        json.dumps(value, ensure_ascii=False),
        value.encode("unicode_escape").decode(),
        repr(value.encode()),
        f"Illegal header value b'Bearer {value}'",
    ]
    for text in spellings:
        clean = redact(f"before {text} after")
        assert "9f8e7d" not in clean, text
        assert REDACTED in clean and clean.startswith("before ")


def test_redact_takes_extra_secrets_and_hides_url_credentials() -> None:
    assert redact("token abcd-extra-1 here", ["abcd-extra-1"]) == "token *** here"
    text = "GET https://alice:pw-123@host.example/v1/chat/completions?api-key=q-999&api-version=2024 ok"
    clean = redact(text)
    assert "alice" not in clean and "pw-123" not in clean and "q-999" not in clean
    assert "https://***@host.example/v1/chat/completions?api-key=***&api-version=2024 ok" in clean


def test_redact_url() -> None:
    assert redact_url("http://u:p@h:1/x?key=v&a=") == "http://***@h:1/x?key=***&a="
    assert redact_url("https://api.deepseek.com/chat/completions") == (
        "https://api.deepseek.com/chat/completions"
    )


@pytest.mark.parametrize("raw", ["sk-abc\r\n", "  sk-abc\n", "\tsk-abc ", "sk-abc\r"])
def test_surrounding_whitespace_is_stripped(raw: str) -> None:
    key = clean_api_key(raw, "MY_KEY")
    assert key is not None and key.reveal() == "sk-abc"


@pytest.mark.parametrize(
    "raw",
    ["sk-a\rbc-secretpart", "sk-a\x00b-secretpart", "sk-\x1b[2J-secretpart", "sk-é-secretpart"],
)
def test_inner_control_character_is_a_config_error_naming_only_the_variable(raw: str) -> None:
    with pytest.raises(ConfigError) as caught:
        api_key_from_env({"MY_KEY": raw}, "MY_KEY")
    message = str(caught.value)
    assert "MY_KEY" in message and "secretpart" not in message and "\n" not in message


@pytest.mark.parametrize("raw", [None, "", "  \r\n"])
def test_empty_key_is_no_key(raw: str | None) -> None:
    env = {} if raw is None else {"K": raw}
    assert api_key_from_env(env, "K") is None


def test_logging_filter_redacts_message_arguments_and_traceback() -> None:
    Secret("sk-logged-secret-77")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("tests.secrets.filter")
    logger.addFilter(RedactingFilter())
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning(
            "request to %s with %s", "https://u:pw-55@h/x?api-key=zz-1", "sk-logged-secret-77"
        )
        try:
            raise RuntimeError("header Bearer sk-logged-secret-77")
        except RuntimeError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    text = stream.getvalue()
    assert "request to https://***@h/x?api-key=*** with ***" in text
    assert "RuntimeError: header Bearer ***" in text
    assert "sk-logged-secret-77" not in text and "pw-55" not in text and "zz-1" not in text
