"""``dsh acp --log FILE`` against the fake server: no key or URL credential in errors or the log,
and a provider's wait before a retry does not disturb the agent."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import RequestError, text_block

from tests.acp.harness import open_agent
from tests.acp.seed import read_log
from tests.providers.fake_openai import FakeOpenAIServer, chunk_json

pytestmark = pytest.mark.timeout(120)

KEY = "sk-acp-secret-" + "5150"
SECRETS = (KEY, "pw-acp-61", "q-acp-62", "bob")


def agent_env(server: FakeOpenAIServer) -> dict[str, str]:
    return {
        "DSH_PROVIDER": "openai",
        "DSH_MODEL": "fake-model",
        "DSH_BASE_URL": f"http://bob:pw-acp-61@127.0.0.1:{server.port}/v1?api-key=q-acp-62",
        "DEEPSEEK_API_KEY": KEY,
    }


async def test_errors_and_the_log_file_hold_no_secrets(
    tmp_path: Path, fake_openai: FakeOpenAIServer
) -> None:
    db = tmp_path / "db.sqlite3"
    log = tmp_path / "agent.log"
    url = agent_env(fake_openai)["DSH_BASE_URL"]
    fake_openai.error(401, f"key {KEY} is not valid for {url}")
    fake_openai.error(429, "slow down", headers={"Retry-After": "0.2"})
    fake_openai.sse([chunk_json("fine", finish="stop")])
    async with open_agent(
        tmp_path, db, env=agent_env(fake_openai), extra_args=["--log", str(log)]
    ) as agent:
        sid = (await agent.conn.new_session(cwd="/p", mcp_servers=[])).session_id
        with pytest.raises(RequestError) as caught:
            await agent.conn.prompt(session_id=sid, prompt=[text_block("hello?")])
        shown = f"{caught.value} {caught.value.data!r}"
        assert "rejected" in shown
        answer = await agent.conn.prompt(session_id=sid, prompt=[text_block("again")])
        assert answer.stop_reason == "end_turn"
        assert agent.client.agent_text(sid) == "fine"
    assert fake_openai.requests[0].path == "/v1/chat/completions?api-key=q-acp-62"
    logged = log.read_text(encoding="utf-8")
    assert "HTTP Request: POST" in logged
    stored = repr(await read_log(db, sid))
    for secret in SECRETS:
        assert secret not in shown
        assert secret not in logged
        assert secret not in stored


def test_every_logger_of_dsh_acp_is_redacted(tmp_path: Path) -> None:
    """Not only the HTTP client's loggers: a record from any logger (the agent's own, a
    library's) holds no key once ``dsh acp --log FILE`` has set logging up."""
    import logging

    from core.secrets import Secret
    from tui.acp.serve import _configure_logging

    log_file = tmp_path / "acp.log"
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        _configure_logging(str(log_file))
        key = Secret("sk-any-logger-" + "7319")
        logging.getLogger("dsh.acp.somewhere").warning("request failed with %s", key.reveal())
        try:
            raise RuntimeError(f"Bearer {key.reveal()}")
        except RuntimeError:
            logging.getLogger("some.library").exception("crash")
        for handler in root.handlers:
            handler.flush()
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    text = log_file.read_text(encoding="utf-8")
    assert "request failed with ***" in text and "Bearer ***" in text
    assert "7319" not in text
