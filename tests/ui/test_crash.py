"""A crash in the model-call path prints a traceback without frame locals and without the key."""

from __future__ import annotations

import asyncio

import pytest
from textual.worker import WorkerFailed

from core.providers.openai import OpenAICompatibleProvider
from tests.providers.fake_openai import FakeOpenAIServer, chunk_json, fake_openai
from tests.ui.conftest import SIZE, make_app
from tui.runtime import Runtime
from tui.transcript import ReplyView

__all__ = ["fake_openai"]

KEY = "sk-" + "tui-crash-" + "4711"


def exploding_append(self: ReplyView, kind: str, text: str) -> None:
    key = KEY
    headers = {"Authorization": "Bearer " + key}
    raise RuntimeError(f"Illegal header value b'{headers['Authorization']}\\r'")


async def test_crash_report_shows_no_locals_and_no_key(
    runtime: Runtime,
    fake_openai: FakeOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake_openai.sse([chunk_json("hello", finish="stop")])
    provider = OpenAICompatibleProvider(base_url=fake_openai.base_url, api_key=KEY)
    rt = Runtime(runtime.config, runtime.store, runtime.query, runtime.service, provider)
    monkeypatch.setattr(ReplyView, "append", exploding_append)
    app = make_app(rt)
    with pytest.raises(WorkerFailed, match="Illegal header value"):
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            await pilot.press(*"hi", "enter")
            await asyncio.wait_for(app._exception_event.wait(), 10)
    await provider.aclose()
    printed = capsys.readouterr().err
    assert "RuntimeError" in printed and "Illegal header value" in printed
    assert "exploding_append" in printed  # the frames are there ...
    assert "─ locals ─" not in printed  # ... but not their variables (no locals panel)
    assert KEY not in printed and "tui-crash-4711" not in printed
    assert "Bearer ***" in printed
