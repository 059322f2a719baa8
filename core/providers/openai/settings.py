"""The provider's defaults: DeepSeek's endpoint, model and key variable, and the bounds of
one reply (its time, its bytes)."""

from __future__ import annotations

from typing import Final

DEFAULT_BASE_URL: Final = "https://api.deepseek.com"
DEFAULT_MODEL: Final = "deepseek-chat"
DEFAULT_API_KEY_ENV: Final = "DEEPSEEK_API_KEY"
DEFAULT_REPLY_TIMEOUT: Final = 600.0
DEFAULT_MAX_REPLY_BYTES: Final = 4 * 1024 * 1024
