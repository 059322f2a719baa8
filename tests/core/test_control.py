"""Retry, edit and resend, fork (issue 32) on every store: new events only, history kept,
the surface as a compaction would leave it, and mistakes refused before anything is stored."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.config import DshConfig
from core.control import EditError, ForkError, fork_session
from core.engine import NothingToAnswerError, ReplyFinished, Submitted
from core.log import ASSISTANT_MESSAGE, SESSION_FORK, SESSION_PROFILE, SESSION_TITLE, Replace
from core.references import SessionReferenceInput, format_session_reference_mention
from core.store import SessionStore
from core.usage import measure
from tests.storekinds import STORE_KINDS, open_kind
from tui.shared.runtime import Runtime, open_runtime, profile_event_data


@pytest.fixture(params=STORE_KINDS)
async def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Runtime]:
    async with open_kind(request, tmp_path) as store, open_runtime(DshConfig(), store=store) as rt:
        yield rt


async def _send(rt: Runtime, session_id: str, text: str) -> list[object]:
    chat = await rt.chat(session_id)
    return [u async for u in chat.send(text)]


def _mention(session_id: str, label: str) -> str:
    return format_session_reference_mention(SessionReferenceInput(session_id, label))


async def _surface(store: SessionStore, rt: Runtime, session_id: str) -> list[int]:
    return [e.seq for e in (await rt.query.read_surface(session_id)).events]


async def test_retry_replaces_the_last_reply_and_keeps_it_in_the_log(runtime: Runtime) -> None:
    rt = runtime
    header = await rt.store.create_session()
    await _send(rt, header.id, "first")
    await _send(rt, header.id, "second")
    before = await _surface(rt.store, rt, header.id)
    old_reply = before[-1]
    chat = await rt.chat(header.id)
    updates = [u async for u in chat.retry()]
    finished = [u for u in updates if isinstance(u, ReplyFinished)]
    assert finished and finished[0].status == "completed"
    new = finished[0].message_event
    assert new is not None
    assert new.surface_op == Replace(old_reply, old_reply)
    assert list(new.source_event_seqs or ()) == [old_reply]
    after = await _surface(rt.store, rt, header.id)
    assert after == [*before[:-1], new.seq]
    log = await rt.store.read_events(header.id)
    replies = [e for e in log if e.type == ASSISTANT_MESSAGE]
    assert [e.seq for e in replies][-2:] == [old_reply, new.seq]
    assert replies[-1].data["turn"] > replies[-2].data["turn"]
    assert replies[-1].data["profile"] == "offline"
    # the model saw the conversation without the reply it replaces: one earlier exchange
    assert "Earlier messages in this conversation: 2." in str(new.data["message"])


async def test_retry_of_an_unanswered_request_answers_it(runtime: Runtime) -> None:
    rt = runtime
    header = await rt.store.create_session()
    chat = await rt.chat(header.id)
    await chat.submit("left without a reply")
    updates = [u async for u in chat.retry()]
    message = next(u for u in updates if isinstance(u, ReplyFinished)).message_event
    assert message is not None and message.surface_op == "append"


async def test_nothing_to_retry(runtime: Runtime) -> None:
    rt = runtime
    header = await rt.store.create_session()
    chat = await rt.chat(header.id)
    with pytest.raises(NothingToAnswerError, match="nothing to retry"):
        [u async for u in chat.retry()]
    assert await rt.store.read_events(header.id) == []


async def test_edit_continues_from_the_edited_message(runtime: Runtime) -> None:
    rt = runtime
    source = await rt.store.create_session()
    await _send(rt, source.id, "background")
    header = await rt.store.create_session()
    await _send(rt, header.id, f"one {_mention(source.id, 'bg')}")
    await _send(rt, header.id, "two")
    surface = (await rt.query.read_surface(header.id)).events
    snapshot, first = surface[0], surface[1]
    assert snapshot.data["source"]["kind"] == "session-reference"
    chat = await rt.chat(header.id)
    updates = [u async for u in chat.edit(first.seq, f"one, edited {_mention(source.id, 'bg')}")]
    submitted = next(u for u in updates if isinstance(u, Submitted))
    new_snapshot, new_message = submitted.events
    assert new_snapshot.surface_op == Replace(snapshot.seq, surface[-1].seq)
    assert sorted(new_snapshot.source_event_seqs or ()) == [e.seq for e in surface]
    assert new_snapshot.data["source"]["kind"] == "session-reference"
    assert new_message.surface_op == "append"
    after = (await rt.query.read_surface(header.id)).events
    assert [e.seq for e in after][:2] == [new_snapshot.seq, new_message.seq]
    assert len(after) == 3 and after[2].type == ASSISTANT_MESSAGE
    # everything before is still in the log
    log_seqs = {e.seq for e in await rt.store.read_events(header.id)}
    assert {e.seq for e in surface} <= log_seqs


async def test_edit_refuses_what_is_not_your_message(runtime: Runtime) -> None:
    rt = runtime
    header = await rt.store.create_session()
    await _send(rt, header.id, "hello")
    surface = (await rt.query.read_surface(header.id)).events
    before = len(await rt.store.read_events(header.id))
    chat = await rt.chat(header.id)
    with pytest.raises(EditError, match="not one of your messages"):
        [u async for u in chat.edit(surface[-1].seq, "x")]
    with pytest.raises(EditError, match="not a message of the current conversation"):
        [u async for u in chat.edit(10_000, "x")]
    assert len(await rt.store.read_events(header.id)) == before


async def test_fork_copies_the_surface_up_to_a_message(runtime: Runtime) -> None:
    rt = runtime
    parent = await rt.store.create_session(cwd="/tmp/\x1b[31mhostile")
    await _send(rt, parent.id, "one")
    await _send(rt, parent.id, "two")
    chat = await rt.chat(parent.id)
    await rt.switch_profile(chat, "offline")
    surface = (await rt.query.read_surface(parent.id)).events
    at = surface[1]  # the first reply
    fork = await fork_session(
        rt.store,
        rt.query,
        parent.id,
        at_seq=at.seq,
        profile=profile_event_data(rt.config.profile()),
    )
    assert fork.id != parent.id and fork.cwd == parent.cwd
    log = await rt.store.read_events(fork.id)
    assert log[0].type == SESSION_FORK
    assert log[0].data["parent"] == {"id": parent.id, "seq": at.seq}
    copied = (await rt.query.read_surface(fork.id)).events
    assert [e.data for e in copied] == [e.data for e in surface[:2]]
    assert [e.time for e in copied] == [e.time for e in surface[:2]]
    assert {e.type for e in log} >= {SESSION_PROFILE, SESSION_TITLE}
    title = await rt.query.read_title(fork.id)
    assert title is not None and title.title == "Fork of one" and title.source["kind"] == "fallback"
    # the parent is unchanged, and a fork is an ordinary session to reference and to send to
    assert (await rt.query.read_surface(parent.id)).events == surface
    other = await rt.store.create_session()
    updates = await _send(rt, other.id, f"see {_mention(fork.id, 'fork')}")
    assert any(isinstance(u, ReplyFinished) and u.status == "completed" for u in updates)
    updates = await _send(rt, fork.id, "go on")
    assert any(isinstance(u, ReplyFinished) and u.status == "completed" for u in updates)


async def test_fork_refusals_store_nothing(runtime: Runtime) -> None:
    rt = runtime
    empty = await rt.store.create_session()
    with pytest.raises(ForkError, match="no messages"):
        await fork_session(rt.store, rt.query, empty.id)
    await _send(rt, empty.id, "x")
    count = len(await rt.store.list_headers())
    with pytest.raises(ForkError, match="seq 9999 is not a message"):
        await fork_session(rt.store, rt.query, empty.id, at_seq=9999)
    with pytest.raises(ForkError, match="title cannot be empty"):
        await fork_session(rt.store, rt.query, empty.id, title=" \n ")
    assert len(await rt.store.list_headers()) == count
    named = await fork_session(rt.store, rt.query, empty.id, title="  my\nfork ")
    title = await rt.query.read_title(named.id)
    assert title is not None and (title.title, title.source["kind"]) == ("my fork", "user")


async def test_switched_profile_answers_the_next_turn(tmp_path: Path) -> None:
    config_path = tmp_path / "config.toml"
    config_path.write_text(
        '[profiles.other]\nprovider = "offline"\nmodel = "echo-other"\nsystem_prompt = ""\n'
        "context_window = 1000\nprice_input = 1.0\nprice_output = 2.0\n",
        encoding="utf-8",
    )
    from core.config import load_config

    config = load_config({}, config_path=config_path)
    async with open_runtime(config.with_database(tmp_path / "d.sqlite3")) as rt:
        header = await rt.store.create_session()
        await _send(rt, header.id, "hello")
        chat = await rt.chat(header.id)
        chat = await rt.switch_profile(chat, "other")
        assert (await rt.session_profile(header.id)).profile.name == "other"
        updates = [u async for u in chat.send("again")]
        message = next(u for u in updates if isinstance(u, ReplyFinished)).message_event
        assert message is not None
        assert message.data["message"]["source"]["model"] == "echo-other"
        assert message.data["profile"] == "other"
        usage = await measure(await rt.chat(header.id), config.profiles)
        assert usage.profile == "other" and usage.context_window == 1000
        assert usage.replies == 2 and not usage.next_request_exact
        assert usage.cost is not None and usage.cost > 0
        assert usage.input_tokens > 0 and usage.output_tokens > 0
        # a recorded profile no longer configured falls back to the default, saying so
        await rt.store.append(header.id, SESSION_PROFILE, {"profile": "\x1b[31m[bold]gone"})
        chosen = await rt.session_profile(header.id)
        assert chosen.profile.name == "offline" and chosen.note is not None


async def test_a_missing_key_stores_nothing_and_a_prompt_file_is_read_each_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.config import load_config
    from core.engine import MissingKeyError

    prompt = tmp_path / "prompt.md"
    prompt.write_text("first prompt", encoding="utf-8")
    config_path = tmp_path / "config.toml"
    config_path.write_text(
        '[profiles.keyless]\nprovider = "openai"\napi_key_env = "DSH_TEST_NO_SUCH_KEY"\n'
        f'[profiles.filed]\nprovider = "offline"\nsystem_prompt_file = "{prompt}"\n',
        encoding="utf-8",
    )
    monkeypatch.delenv("DSH_TEST_NO_SUCH_KEY", raising=False)
    config = load_config({}, config_path=config_path)
    async with open_runtime(config.with_database(tmp_path / "d.sqlite3")) as rt:
        header = await rt.store.create_session()
        await _send(rt, header.id, "hello")
        chat = await rt.switch_profile(await rt.chat(header.id), "keyless")
        before = await rt.store.read_events(header.id)
        first_user = (await rt.query.read_surface(header.id)).events[0].seq
        for attempt in (
            lambda: chat.send("lost?"),
            lambda: chat.retry(),
            lambda: chat.edit(first_user, "edited"),
            lambda: chat.reply_to_last(),
        ):
            with pytest.raises(MissingKeyError, match="set DSH_TEST_NO_SUCH_KEY"):
                [u async for u in attempt()]
        with pytest.raises(MissingKeyError):
            await chat.submit("lost?")
        assert await rt.store.read_events(header.id) == before
        chat = await rt.switch_profile(chat, "filed")
        assert (await chat.preview("x"))[0].text == "first prompt"
        prompt.write_text("second prompt", encoding="utf-8")
        assert (await chat.preview("x"))[0].text == "second prompt"
        prompt.unlink()
        count = len(await rt.store.read_events(header.id))
        from core.profiles import ProfileError

        with pytest.raises(ProfileError, match="system_prompt_file"):
            [u async for u in chat.send("x")]
        assert len(await rt.store.read_events(header.id)) == count


async def test_profile_and_fork_events_are_bounded_like_titles(runtime: Runtime) -> None:
    """Every listing reads the latest of each for every session: one member's 1 MB profile
    event must not cost everyone's sidebar a megabyte."""
    from core.errors import InvalidEventError
    from core.limits import MAX_MARK_EVENT_BYTES
    from core.log import NewEvent

    rt = runtime
    header = await rt.store.create_session()
    big = {"profile": "x" * MAX_MARK_EVENT_BYTES}
    for kind in (SESSION_PROFILE, SESSION_FORK):
        with pytest.raises(InvalidEventError, match="at most 8,192 UTF-8 bytes"):
            await rt.store.append(header.id, kind, big)
        with pytest.raises(InvalidEventError, match="at most 8,192 UTF-8 bytes"):
            await rt.store.append_batch(header.id, [NewEvent(kind, big)])
    assert await rt.store.read_events(header.id) == []
    await rt.store.append(header.id, SESSION_PROFILE, {"profile": "x" * 8000})
