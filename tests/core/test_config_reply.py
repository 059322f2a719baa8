"""The reply limits: ``reply_timeout`` and ``max_reply_bytes`` from the file and environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.config import ConfigError, load_config


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


class TestReplyLimits:
    def test_defaults(self, tmp_path: Path) -> None:
        config = load_config({}, config_path=tmp_path / "missing.toml")
        assert config.reply_timeout == 600
        assert config.max_reply_bytes == 4 * 1024 * 1024

    def test_file_then_environment(self, tmp_path: Path) -> None:
        path = write(tmp_path, "reply_timeout = 30\nmax_reply_bytes = 1000\n")
        config = load_config({}, config_path=path)
        assert (config.reply_timeout, config.max_reply_bytes) == (30.0, 1000)
        env = {"DSH_REPLY_TIMEOUT": "0.5", "DSH_MAX_REPLY_BYTES": "2048"}
        config = load_config(env, config_path=path)
        assert (config.reply_timeout, config.max_reply_bytes) == (0.5, 2048)

    @pytest.mark.parametrize(
        ("text", "culprit"),
        [
            ("reply_timeout = 0\n", "reply_timeout"),
            ("reply_timeout = -1.5\n", "reply_timeout"),
            ('reply_timeout = "soon"\n', "reply_timeout"),
            ("reply_timeout = true\n", "reply_timeout"),
            ("reply_timeout = inf\n", "reply_timeout"),
            ("reply_timeout = nan\n", "reply_timeout"),
            ("max_reply_bytes = 0\n", "max_reply_bytes"),
            ("max_reply_bytes = 1.5\n", "max_reply_bytes"),
            ("max_reply_bytes = -4\n", "max_reply_bytes"),
            ("max_reply_bytes = true\n", "max_reply_bytes"),
        ],
    )
    def test_file_values_must_be_positive(self, tmp_path: Path, text: str, culprit: str) -> None:
        with pytest.raises(ConfigError) as caught:
            load_config({}, config_path=write(tmp_path, text))
        message = str(caught.value)
        assert culprit in message and "positive" in message and "\n" not in message

    @pytest.mark.parametrize(
        ("var", "value"),
        [
            ("DSH_REPLY_TIMEOUT", "0"),
            ("DSH_REPLY_TIMEOUT", "-3"),
            ("DSH_REPLY_TIMEOUT", "ten"),
            ("DSH_REPLY_TIMEOUT", "nan"),
            ("DSH_MAX_REPLY_BYTES", "0"),
            ("DSH_MAX_REPLY_BYTES", "4MB"),
        ],
    )
    def test_environment_values_must_be_positive(
        self, tmp_path: Path, var: str, value: str
    ) -> None:
        with pytest.raises(ConfigError) as caught:
            load_config({var: value}, config_path=tmp_path / "missing.toml")
        message = str(caught.value)
        assert message.startswith(f"environment: {var} must be a positive")
