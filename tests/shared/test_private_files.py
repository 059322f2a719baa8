"""Files dsh writes for its user (issue 31 point 7): always mode 0600 (a new file whatever
the umask, an existing 0644 one made 0600), and a symlink planted at the name is never
written through (the atomic writers replace the link itself; its target is untouched)."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from core.log import user_message
from stores import SqliteSessionStore
from tui.app.drafts import load_drafts, save_drafts
from tui.app.screenshot import save_screenshot_file
from tui.app.uistate import UiState, load_ui_state, save_ui_state
from tui.shared.files import write_atomically, write_new_file

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def planted(path: Path, tmp_path: Path) -> Path:
    """A symlink at ``path`` to a file of the victim's, which must stay as it is."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    victim.chmod(0o644)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(victim)
    return victim


def check_private(path: Path, victim: Path | None = None) -> None:
    assert not path.is_symlink() and path.is_file()
    assert mode(path) == 0o600, oct(mode(path))
    if victim is not None:
        assert victim.read_text() == "precious\n" and mode(victim) == 0o644


def write_text(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, "text")


# The writers of private state and of what the user asks for, each as (write, read back).
WRITERS: dict[str, tuple[Callable[[Path], None], Callable[[Path], object]]] = {
    "drafts": (lambda p: save_drafts(p, {"s": "my draft"}), lambda p: load_drafts(p)["s"]),
    "ui state": (
        lambda p: save_ui_state(p, UiState(theme="nord")),
        lambda p: load_ui_state(p).theme,
    ),
    "write_atomically": (write_text, lambda p: p.read_text()),
}
EXPECTED = {"drafts": "my draft", "ui state": "nord", "write_atomically": "text"}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_new_file_is_private_under_umask_022(writer: str, tmp_path: Path) -> None:
    path = tmp_path / "state" / "file.json"
    write, read = WRITERS[writer]
    write(path)
    check_private(path)
    assert read(path) == EXPECTED[writer]


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_an_existing_0644_file_becomes_0600(writer: str, tmp_path: Path) -> None:
    path = tmp_path / "file.json"
    path.write_text("{}")
    path.chmod(0o644)
    WRITERS[writer][0](path)
    check_private(path)


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_planted_symlink_is_replaced_never_written_through(writer: str, tmp_path: Path) -> None:
    path = tmp_path / "state" / "file.json"
    victim = planted(path, tmp_path)
    write, read = WRITERS[writer]
    write(path)
    check_private(path, victim)
    assert read(path) == EXPECTED[writer]


def test_new_files_of_exports_and_screenshots_are_private(tmp_path: Path) -> None:
    # A symlink at the first name is a name taken: the next one is used, the link kept.
    victim = planted(tmp_path / "dsh-s.md", tmp_path)
    written = write_new_file(tmp_path, "dsh-s", ".md", "# s\n")
    assert written.name == "dsh-s (2).md"
    check_private(written, victim)
    shot = save_screenshot_file("<svg/>", "shot.svg", [tmp_path / "Downloads"])
    check_private(shot)


def test_a_database_dsh_creates_is_private_with_its_wal_and_shm(tmp_path: Path) -> None:
    db = tmp_path / "data" / "dsh.sqlite3"

    async def use() -> dict[str, int]:
        async with await SqliteSessionStore.open(db) as store:
            await store.create_session("s")
            await store.append("s", "user/message", user_message("hi"), surface_op="append")
            return {f.name: mode(f) for f in db.parent.iterdir()}  # -wal and -shm go at close

    modes = asyncio.run(use())
    assert set(modes) >= {"dsh.sqlite3", "dsh.sqlite3-wal", "dsh.sqlite3-shm"}
    assert set(modes.values()) == {0o600}, modes
