from __future__ import annotations

import pytest

from tests.providers.fake_openai import fake_openai

__all__ = ["fake_openai"]


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests to the fake server must never be routed through a proxy from the environment."""
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
