"""The TUI's export names its file and never overwrites one (Textual Pilot, real store)."""

from __future__ import annotations

from pathlib import Path

from core.config import DshConfig
from core.log import SESSION_TITLE, NewEvent
from core.providers.offline import OfflineProvider
from stores import SqliteSessionStore
from tui.app.app import DshApp
from tui.shared.runtime import open_runtime


async def test_export_twice_makes_a_second_file_and_names_it(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite3"
    out = tmp_path / "out"
    out.mkdir()
    (out / "dsh-notes.md").write_text("someone else's file\n", encoding="utf-8")
    store = await SqliteSessionStore.open(db)
    try:
        await store.create_session("notes")
        await store.append_batch(
            "notes", [NewEvent(SESSION_TITLE, {"title": "Notes", "source": {"kind": "user"}})]
        )
        config = DshConfig(database=db)
        async with open_runtime(config, store=store, provider=OfflineProvider()) as rt:
            app = DshApp(rt, cwd=str(out), cursor_blink=False)
            notices: list[str] = []
            app.notify = lambda message, **_: notices.append(str(message))  # type: ignore[method-assign]
            async with app.run_test(size=(100, 30)) as pilot:
                for _ in range(100):
                    if app.current_id == "notes":
                        break
                    await pilot.pause(0.05)
                await app.action_export("md")
                await app.action_export("md")
    finally:
        await store.close()
    assert (out / "dsh-notes.md").read_text(encoding="utf-8") == "someone else's file\n"
    assert (out / "dsh-notes (2).md").read_text(encoding="utf-8").startswith("# Notes")
    assert (out / "dsh-notes (3).md").read_text(encoding="utf-8").startswith("# Notes")
    assert notices == [
        f"Exported to {out / 'dsh-notes (2).md'}",
        f"Exported to {out / 'dsh-notes (3).md'}",
    ]
    assert sorted(p.name for p in out.iterdir()) == [
        "dsh-notes (2).md",
        "dsh-notes (3).md",
        "dsh-notes.md",
    ]
