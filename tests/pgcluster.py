"""A throwaway PostgreSQL cluster for the tests: ``initdb`` in a temp dir, one unix socket.

The server refuses to run as root, so when the tests run as root the cluster belongs to an
unprivileged OS user (``postgres`` when the machine has one, else a system user created for
the purpose, else ``nobody``) and ``initdb``/``pg_ctl`` run as that user. It listens on a
unix socket in its own directory only (no TCP port, nothing another host can reach), trusts
local logins except for one password-protected role used to test refused logins, and is
tuned for speed (no fsync: the data is thrown away).

Without the binaries the PostgreSQL tests skip locally, saying why, and fail under
``CI=true`` (CI must never pass by skipping them).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

__all__ = [
    "ALICE",
    "BOB",
    "SECRET_PASSWORD",
    "SECRET_ROLE",
    "TEAM_GROUP",
    "Cluster",
    "find_binaries",
    "running_cluster",
]

SUPERUSER = "dsh"
DATABASE = "dsh"
SECRET_ROLE = "team"
# Two plain login roles of a team database (issue 17): no superuser, no BYPASSRLS, members
# of the group role that may use dsh's tables.
TEAM_GROUP = "dsh_users"
ALICE = "alice"
BOB = "bob"
SECRET_PASSWORD = "pg-Pa55word-never-shown"

_BATCH = 25  # migrated schemas made per psql call

_SPEED = (
    "fsync=off",
    "synchronous_commit=off",
    "full_page_writes=off",
    "max_connections=100",
    "shared_buffers=32MB",
)


def find_binaries() -> Path | None:
    """The folder holding ``initdb``, ``pg_ctl`` and ``postgres`` (``PATH`` first, then
    Debian's ``/usr/lib/postgresql/<version>/bin``), or ``None``."""
    candidates: list[Path] = []
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(Path(initdb).resolve().parent)
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        candidates.append(Path(folder))
    for folder in candidates:
        if all((folder / name).is_file() for name in ("initdb", "pg_ctl", "postgres")):
            return folder
    return None


def _server_user() -> pwd.struct_passwd | None:
    """The unprivileged user to run the server as (``None`` when we are not root)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "dsh-pgtest"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        subprocess.run(
            [
                "useradd",
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                "dsh-pgtest",
            ],
            check=True,
            capture_output=True,
        )
        return pwd.getpwnam("dsh-pgtest")
    return pwd.getpwnam("nobody")


def binaries_or_skip() -> Path:
    """``find_binaries()``, or skip the test saying why, except under ``CI=true``, where
    that is a failure: CI must run the PostgreSQL tests, never pass by skipping them."""
    bindir = find_binaries()
    if bindir is None:
        skip_unless_ci(
            "PostgreSQL binaries (initdb, pg_ctl, postgres) not found on PATH or in "
            "/usr/lib/postgresql/*/bin: install Debian's postgresql package"
        )
    assert bindir is not None
    return bindir


def skip_unless_ci(reason: str) -> None:
    """Skip the test saying ``reason``; under ``CI=true`` fail it instead."""
    import pytest

    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason + " (CI=true: these tests must run)")
    pytest.skip(reason)


def server_user() -> pwd.struct_passwd | None:
    """The OS user the test servers (PostgreSQL, PgBouncer) run as; ``None`` unless root."""
    return _server_user()


@dataclass(frozen=True)
class Cluster:
    """A running cluster: its socket folder and a superuser URL to its ``dsh`` database."""

    bindir: Path
    root: Path
    socket_dir: Path
    settings: tuple[str, ...] = ()  # the server settings beyond the defaults it started with
    _ready: dict[bool, list[str]] = field(default_factory=dict, compare=False, repr=False)

    def url(self, database: str = DATABASE, *, user: str = SUPERUSER, **options: str) -> str:
        query = "&".join(
            f"{k}={quote(v, safe='')}" for k, v in {"host": str(self.socket_dir), **options}.items()
        )
        return f"postgresql://{user}@/{database}?{query}"

    def password_url(self, password: str, database: str = DATABASE) -> str:
        """A URL logging in as the password-protected role."""
        return (
            f"postgresql://{SECRET_ROLE}:{quote(password, safe='')}@/{database}"
            f"?host={quote(str(self.socket_dir), safe='')}"
        )

    def fresh_schema_url(self, *, migrated: bool = False) -> tuple[str, str]:
        """A new schema and the URL whose ``search_path`` is that schema: each test gets a
        store of its own without the cost of a database per test. ``migrated``: with dsh's
        tables already in it (made in batches, one ``psql`` call for many), for tests
        about the store's behaviour rather than its migrations."""
        ready = self._ready.setdefault(migrated, [])
        if not ready:
            names = ["t_" + uuid.uuid4().hex[:16] for _ in range(_BATCH if migrated else 1)]
            self.psql(";".join(self._schema_sql(name, migrated) for name in names))
            ready.extend(names)
        name = ready.pop()
        return name, self.url(search_path=name)

    def team_schema(self) -> str:
        """A new, empty schema the team's group role may use and create tables in: the
        first of ``alice`` and ``bob`` to open dsh on it migrates it (and so owns the
        tables). Give each its URL with ``team_url``."""
        name = "team_" + uuid.uuid4().hex[:16]
        self.psql(f"CREATE SCHEMA {name}; GRANT USAGE, CREATE ON SCHEMA {name} TO {TEAM_GROUP}")
        return name

    def team_url(self, user: str, schema: str) -> str:
        """The URL of ``schema`` for the plain login role ``user``."""
        return self.url(user=user, search_path=schema)

    @staticmethod
    def _schema_sql(name: str, migrated: bool) -> str:
        sql = f"CREATE SCHEMA {name}"
        if migrated:
            from stores.postgres import MIGRATIONS, SCHEMA_VERSION

            statements = [s for step in MIGRATIONS for s in step]
            statements += [
                "CREATE TABLE dsh_schema (version integer NOT NULL)",
                f"INSERT INTO dsh_schema (version) VALUES ({SCHEMA_VERSION})",
            ]
            sql += f";SET search_path = {name};" + ";".join(statements) + ";RESET search_path"
        return sql

    # -- stopping and starting (tests of faults: a restart, a server that is down) --------

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: connections are ended, as by an admin's restart;
        ``immediate``: as by a crash). Its data and socket folder stay."""
        _run_as(
            _server_user(),
            [str(self.bindir / "pg_ctl"), "-D", str(self.root / "data"), "-m", mode, "-w", "stop"],
            timeout=60,
        )

    def start(self) -> None:
        """Start the server again, with the options it first started with."""
        _run_as(
            _server_user(),
            _start_argv(self.bindir, self.root, self.socket_dir, self.settings),
            timeout=90,
        )

    def restart(self, mode: str = "fast", *, down: float = 0.0) -> None:
        """Stop then start the server: every connection to it is lost. ``down``: seconds
        it stays stopped in between (a restart that a reply's next write surely meets:
        on a cluster in memory a restart can end inside one flush interval, and the pool
        then reconnects unnoticed)."""
        self.stop(mode)
        time.sleep(down)
        self.start()

    def psql(self, sql: str, database: str = DATABASE) -> str:
        """Run ``sql`` as the superuser with ``psql`` and return its unaligned output.

        A long script (beyond what one command-line argument may hold) goes through
        standard input instead, statement by statement."""
        long = len(sql.encode()) > 100_000
        result = subprocess.run(
            [
                str(self.bindir / "psql"),
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                str(self.socket_dir),
                "-U",
                SUPERUSER,
                "-d",
                database,
                *(() if long else ("-c", sql)),
            ],
            input=sql if long else None,
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return result.stdout.strip()


def _run_as(
    user: pwd.struct_passwd | None, argv: list[str], **kw: object
) -> subprocess.CompletedProcess[str]:
    ids: dict[str, object] = {}
    if user is not None:
        ids = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
    env = {**os.environ, "LC_ALL": "C", "TZ": "UTC"}
    env.pop("PGDATA", None)
    return subprocess.run(
        argv,
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
        **ids,
        **kw,  # type: ignore[call-overload]
    )


def _start_argv(bindir: Path, root: Path, sockets: Path, settings: Sequence[str] = ()) -> list[str]:
    """``pg_ctl start`` of the cluster in ``root``, listening on ``sockets`` only, with
    ``settings`` after the defaults."""
    options = " ".join(
        ["-c listen_addresses=''", f"-c unix_socket_directories={sockets}"]
        + [f"-c {s}" for s in (*_SPEED, *settings)]
    )
    return [
        str(bindir / "pg_ctl"),
        "-D",
        str(root / "data"),
        "-l",
        str(root / "log"),
        "-o",
        options,
        "-w",
        "-t",
        "60",
        "start",
    ]


def _cluster_parent() -> str:
    """Where the cluster's folder goes: the run's temp folder (in memory when the tests
    chose ``/dev/shm``, where a migrated schema's DDL costs the server about 45 ms of CPU
    against 70 ms on this machine's disk) when its path is short, else ``/tmp``: the unix
    socket's path inside it must fit in about 100 bytes."""
    parent = tempfile.gettempdir()
    return parent if len(parent) <= 40 else "/tmp"


@contextlib.contextmanager
def running_cluster(bindir: Path, settings: Sequence[str] = ()) -> Iterator[Cluster]:
    """Start a cluster in a new temp dir; stop it and remove the dir on exit. ``settings``
    (``name=value``) are passed to the server after the defaults, so they win (a load
    benchmark's ``max_connections=400``)."""
    user = _server_user()
    root = Path(tempfile.mkdtemp(prefix="dshpg-", dir=_cluster_parent()))
    if user is not None:
        os.chown(root, user.pw_uid, user.pw_gid)
    data, sockets = root / "data", root / "s"
    try:
        _run_as(user, ["mkdir", "-m", "0700", str(sockets)])
        _run_as(
            user,
            [
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-U",
                SUPERUSER,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
            timeout=120,
        )
        # The password role logs in with a password; everyone else is trusted.
        hba = data / "pg_hba.conf"
        hba.write_text(f"local all {SECRET_ROLE} scram-sha-256\nlocal all all trust\n")
        if user is not None:
            os.chown(hba, user.pw_uid, user.pw_gid)
        _run_as(user, _start_argv(bindir, root, sockets, settings), timeout=90)
        try:
            cluster = Cluster(bindir, root, sockets, tuple(settings))
            cluster.psql(f"CREATE DATABASE {DATABASE}", database="postgres")
            # Where an admin would put it: in public, whose objects every role may use,
            # so that the tables every test schema makes (a member's included) get the
            # trigram index whoever makes them.
            cluster.psql("CREATE EXTENSION pg_trgm SCHEMA public")
            cluster.psql(
                f"CREATE ROLE {SECRET_ROLE} LOGIN PASSWORD '{SECRET_PASSWORD}';"
                f"GRANT ALL ON DATABASE {DATABASE} TO {SECRET_ROLE};"
                # Its default search_path ("$user", public) finds its own schema first.
                f"CREATE SCHEMA {SECRET_ROLE} AUTHORIZATION {SECRET_ROLE};"
                # The team of issue 17: plain roles in one group, as the README tells an
                # admin to set them up.
                f"CREATE ROLE {TEAM_GROUP} NOLOGIN;"
                f"CREATE ROLE {ALICE} LOGIN NOSUPERUSER NOBYPASSRLS IN ROLE {TEAM_GROUP};"
                f"CREATE ROLE {BOB} LOGIN NOSUPERUSER NOBYPASSRLS IN ROLE {TEAM_GROUP}"
            )
            yield cluster
        finally:
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                _run_as(
                    user,
                    [str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                    timeout=60,
                )
    except subprocess.CalledProcessError as err:
        log = root / "log"
        detail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise RuntimeError(
            f"could not start the test PostgreSQL cluster: {err.cmd[0]} failed: "
            f"{err.stderr or err.stdout}\n{detail}"
        ) from err
    finally:
        shutil.rmtree(root, ignore_errors=True)
