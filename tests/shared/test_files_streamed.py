"""``tui.shared.files.write_streamed_atomically``: an export written as it is read still
lands whole or not at all, as a 0600 file, never through a planted symlink."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tui.shared.files import write_streamed_atomically


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_chunks_are_written_in_order_to_a_0600_file(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        written = write_streamed_atomically(tmp_path / "out.md", (f"{n}\n" for n in range(1000)))
    finally:
        os.umask(old)
    assert written == tmp_path / "out.md"
    assert written.read_text("utf-8") == "".join(f"{n}\n" for n in range(1000))
    assert _mode(written) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["out.md"]  # no temp file left


def test_an_existing_file_becomes_0600(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("old\n")
    target.chmod(0o644)
    write_streamed_atomically(target, ["new\n"])
    assert target.read_text() == "new\n"
    assert _mode(target) == 0o600


def test_a_failure_midway_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("old\n")

    def failing() -> Iterator[str]:
        yield "first line\n"
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        write_streamed_atomically(target, failing())
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_a_chunk_that_does_not_encode_writes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    with pytest.raises(UnicodeEncodeError):
        write_streamed_atomically(target, ["fine\n", "lone \udc80 surrogate\n"])
    assert list(tmp_path.iterdir()) == []


def test_a_symlink_at_the_path_is_replaced_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    link = tmp_path / "out.md"
    link.symlink_to(victim)
    write_streamed_atomically(link, ["export\n"])
    assert victim.read_text() == "precious\n"
    assert not link.is_symlink()
    assert link.read_text() == "export\n"
