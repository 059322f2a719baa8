"""A throwaway PgBouncer in front of a test cluster (``tests.pgcluster``): transaction
pooling, as teams run it, on a unix socket of its own beside the server's.

PgBouncer refuses to run as root, so it runs as the cluster's unprivileged OS user. Logins
are trusted, as the cluster's are; PgBouncer still wants every user it lets in listed in its
``auth_file``, so the caller names them. Without the ``pgbouncer`` binary the tests that
need it skip locally and fail under ``CI=true`` (see ``tests/conftest.py``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from tests.pgcluster import DATABASE, SUPERUSER, Cluster, server_user, skip_unless_ci

__all__ = ["Bouncer", "find_pgbouncer", "pgbouncer_or_skip", "running_pgbouncer"]

PORT = 6432


def find_pgbouncer() -> Path | None:
    """Debian's ``/usr/sbin/pgbouncer`` (not on a plain user's ``PATH``), or ``PATH``'s."""
    for candidate in (shutil.which("pgbouncer"), "/usr/sbin/pgbouncer"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def pgbouncer_or_skip() -> Path:
    """``find_pgbouncer()``, or skip the test saying why (a failure under ``CI=true``)."""
    binary = find_pgbouncer()
    if binary is None:
        skip_unless_ci(
            "pgbouncer not found on PATH or in /usr/sbin: install Debian's pgbouncer package"
        )
    assert binary is not None
    return binary


@dataclass(frozen=True)
class Bouncer:
    """A running PgBouncer: URLs through it, and its admin console."""

    cluster: Cluster
    socket_dir: Path
    pid: int

    def url(self, database: str = DATABASE, *, user: str = SUPERUSER, **options: str) -> str:
        query = "&".join(
            f"{k}={quote(v, safe='')}"
            for k, v in {"host": str(self.socket_dir), "port": str(PORT), **options}.items()
        )
        return f"postgresql://{user}@/{database}?{query}"

    def team_url(self, user: str, schema: str) -> str:
        return self.url(user=user, search_path=schema)

    def show(self, what: str) -> list[list[str]]:
        """``SHOW <what>`` on the admin console (``pools``, ``servers``, ``clients``…)."""
        result = subprocess.run(
            [
                str(self.cluster.bindir / "psql"),
                "-X",
                "-q",
                "-A",
                "-t",
                "-F",
                "\t",
                "-h",
                str(self.socket_dir),
                "-p",
                str(PORT),
                "-U",
                SUPERUSER,
                "-d",
                "pgbouncer",
                "-c",
                f"SHOW {what}",
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=30,
        )
        return [line.split("\t") for line in result.stdout.splitlines() if line]


def _ini(
    cluster: Cluster,
    sockets: Path,
    root: Path,
    pool_mode: str,
    pool_size: int,
    ignore: str,
    more: Sequence[str] = (),
    max_db_connections: int = 0,
) -> str:
    return "\n".join(
        [
            "[databases]",
            f"* = host={cluster.socket_dir} port=5432",
            "[pgbouncer]",
            "listen_addr =",
            f"listen_port = {PORT}",
            f"unix_socket_dir = {sockets}",
            "auth_type = trust",
            f"auth_file = {root / 'users.txt'}",
            f"admin_users = {SUPERUSER}",
            f"pool_mode = {pool_mode}",
            f"default_pool_size = {pool_size}",
            "max_client_conn = 2000",
            f"max_db_connections = {max_db_connections}",
            f"logfile = {root / 'pgbouncer.log'}",
            f"pidfile = {root / 'pgbouncer.pid'}",
            # By default what an install has: no startup parameter beyond the usual few
            # is let through (dsh must not need any).
            f"ignore_startup_parameters = {ignore}",
            "server_reset_query =",
            *more,
            "",
        ]
    )


@contextlib.contextmanager
def running_pgbouncer(
    cluster: Cluster,
    users: Sequence[str],
    *,
    pool_mode: str = "transaction",
    pool_size: int = 20,
    name: str | None = None,
    ignore_startup_parameters: Sequence[str] = ("extra_float_digits",),
    server_login_retry: float | None = None,
    max_db_connections: int = 0,
) -> Iterator[Bouncer]:
    """Start PgBouncer in front of ``cluster`` for ``users``; stop it on exit. ``name``:
    its folder's (so a second start listens where the first did), else a new one.
    ``server_login_retry``: how long it waits to log in again after the server refused
    (a restart; PgBouncer's default is 15 s). ``pool_size`` is per user (each member's
    role has a pool of its own); ``max_db_connections`` caps the server connections of
    all of them together (0: no cap)."""
    binary = find_pgbouncer()
    if binary is None:
        raise RuntimeError("pgbouncer not found: install Debian's pgbouncer package")
    user = server_user()
    root = cluster.root / (name or f"bouncer-{os.getpid()}-{time.monotonic_ns()}")
    sockets = root / "s"
    sockets.mkdir(parents=True)
    (root / "users.txt").write_text("".join(f'"{name}" ""\n' for name in users))
    (root / "pgbouncer.ini").write_text(
        _ini(
            cluster,
            sockets,
            root,
            pool_mode,
            pool_size,
            ",".join(ignore_startup_parameters),
            () if server_login_retry is None else (f"server_login_retry = {server_login_retry:g}",),
            max_db_connections,
        )
    )
    if user is not None:
        for path in (root, sockets, root / "users.txt", root / "pgbouncer.ini"):
            os.chown(path, user.pw_uid, user.pw_gid)
    ids: dict[str, object] = {}
    if user is not None:
        ids = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
    process = subprocess.Popen(
        [str(binary), "-q", str(root / "pgbouncer.ini")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd="/",
        **ids,  # type: ignore[call-overload]
    )
    try:
        _wait_for_socket(sockets / f".s.PGSQL.{PORT}", process, root)
        yield Bouncer(cluster, sockets, process.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGINT)  # shut down at once, dropping clients
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(root, ignore_errors=True)


def _wait_for_socket(path: Path, process: subprocess.Popen[bytes], root: Path) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log = root / "pgbouncer.log"
            said = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
            raise RuntimeError(f"pgbouncer exited at start ({process.returncode}): {stderr}{said}")
        if path.exists():
            with socket.socket(socket.AF_UNIX) as probe:
                try:
                    probe.connect(str(path))
                except OSError:
                    pass
                else:
                    return
        time.sleep(0.02)
    raise RuntimeError("pgbouncer did not open its socket within 20 s")
