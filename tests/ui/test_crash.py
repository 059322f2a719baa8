"""A crash in the model-call path prints a traceback without frame locals and without the key;
a provider's long wait is shown in the status line."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest
from textual.worker import WorkerFailed

from core.providers.base import Finish, ProviderMessage, StreamEvent, TextDelta, Waiting
from core.providers.openai import OpenAICompatibleProvider
from tests.providers.fake_openai import FakeOpenAIServer, chunk_json, fake_openai
from tests.ui.conftest import SIZE, make_app
from tests.ui.snapshots import screen_text
from tests.ui.test_app import wait_for
from tui.app.transcript.transcript import ReplyView
from tui.shared.runtime import Runtime

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
            await asyncio.wait_for(app._exception_event.wait(), 60)  # a bound, not a timing
    await provider.aclose()
    # The app prints its report as its run ends, which on a loaded machine can come after
    # run_test has raised: wait for it (a bound, not a timing).
    printed = ""
    for _ in range(600):
        printed += capsys.readouterr().err
        if "Illegal header value" in printed:
            break
        await asyncio.sleep(0.1)
    assert "RuntimeError" in printed and "Illegal header value" in printed
    assert "exploding_append" in printed  # the frames are there ...
    assert "─ locals ─" not in printed  # ... but not their variables (no locals panel)
    assert KEY not in printed and "tui-crash-4711" not in printed
    assert "Bearer ***" in printed


class WaitingProvider:
    """Announces a long wait (as a rate-limited provider does), then answers on request."""

    name = "waiting"
    model = "wait-1"

    def __init__(self) -> None:
        self.go = asyncio.Event()

    async def stream(
        self, messages: Sequence[ProviderMessage], *, cancel: asyncio.Event | None = None
    ) -> AsyncIterator[StreamEvent]:
        yield Waiting(91.0, "\x1b]0;x\x07rate limited by api.example (HTTP 429)")
        await self.go.wait()
        yield TextDelta("done")
        yield Finish("stop")

    async def aclose(self) -> None:
        return None


async def test_status_line_says_how_long_it_waits(runtime: Runtime) -> None:
    provider = WaitingProvider()
    rt = Runtime(runtime.config, runtime.store, runtime.query, runtime.service, provider)
    app = make_app(rt)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press(*"hi", "enter")
        await wait_for(pilot, lambda: "Waiting 91 s" in screen_text(app))
        line = next(row for row in screen_text(app).splitlines() if "Waiting 91 s" in row)
        assert "Waiting 91 s before retrying (Esc stops): " in line
        assert "\x1b" not in line and "\x07" not in line
        provider.go.set()
        await wait_for(pilot, lambda: not app.streaming)
        assert "Waiting 91 s" not in screen_text(app)
