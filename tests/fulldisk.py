"""A real full disk for tests: a tiny tmpfs mounted for one test, filled on demand.

Mounting needs root (CAP_SYS_ADMIN). Where it is refused the tests that need it skip with
the reason, except under CI (``CI=true``), where they fail: CI must exercise the real
ENOSPC path, not quietly leave it out.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from stores import SqliteSessionStore

__all__ = ["SmallDisk", "cap_pages", "small_disk", "tmpfs_mounts"]

_FILLER = "filler.bin"


async def cap_pages(store: SqliteSessionStore, extra: int = 0) -> None:
    """Let the store's database grow by at most ``extra`` pages from now on (SQLITE_FULL,
    "database or disk is full", after that); a large ``extra`` lifts the cap again.
    ``max_page_count`` is a setting of one connection: the store's own."""
    conn = store._live()  # the test reaches the one connection the setting applies to
    row = await (await conn.execute("PRAGMA page_count")).fetchone()
    assert row is not None
    await conn.execute(f"PRAGMA max_page_count = {row[0] + extra}")


class SmallDisk:
    """A mounted tmpfs of a few hundred KiB; ``fill`` leaves (about) ``leave`` bytes free."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def free_bytes(self) -> int:
        stats = os.statvfs(self.root)
        return stats.f_bavail * stats.f_frsize

    def fill(self, leave: int = 0) -> None:
        """Write a filler file until only ``leave`` bytes (rounded to pages) are free."""
        fd = os.open(self.root / _FILLER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            block = b"\0" * 4096
            while self.free_bytes() > leave:
                try:
                    os.write(fd, block[: max(1, min(4096, self.free_bytes() - leave))])
                except OSError:
                    break  # ENOSPC: as full as it gets
        finally:
            os.close(fd)

    def free(self) -> None:
        """Remove the filler: the space is back."""
        (self.root / _FILLER).unlink(missing_ok=True)


def _mount(target: Path, size: int) -> str | None:
    """Mount a tmpfs of ``size`` bytes at ``target``; the reason it failed, or ``None``."""
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", f"dsh-{uuid.uuid4().hex[:8]}", target],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError) as err:
        return str(err)
    return None if done.returncode == 0 else (done.stderr.strip() or f"exit {done.returncode}")


def _unmount(target: Path) -> None:
    for args in (["umount", str(target)], ["umount", "-l", str(target)]):
        if subprocess.run(args, capture_output=True, timeout=10).returncode == 0:
            return


@pytest.fixture(scope="session")
def tmpfs_mounts() -> Iterator[list[Path]]:
    """Every tmpfs mounted in this test session; whatever a test left mounted goes at the end."""
    mounted: list[Path] = []
    yield mounted
    for target in mounted:
        if os.path.ismount(target):
            _unmount(target)


@pytest.fixture
def small_disk(tmp_path: Path, tmpfs_mounts: list[Path]) -> Iterator[SmallDisk]:
    """A 1 MiB tmpfs for this test only (unmounted after it)."""
    target = tmp_path / "disk"
    target.mkdir()
    problem = _mount(target, 1 << 20)
    if problem is not None:
        message = f"cannot mount a tmpfs to fill a disk for real: {problem}"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message + " (CI must run this test)")
        pytest.skip(message)
    tmpfs_mounts.append(target)
    try:
        yield SmallDisk(target)
    finally:
        _unmount(target)
