"""Where a PostgreSQL store lives: its URL, how a user reads it, and connection errors.

A location is a ``postgresql://`` (or ``postgres://``) URL as libpq takes it:
``postgresql://user:password@host:port/dbname`` with query options such as
``?host=/run/postgresql`` (a unix-socket folder), ``port=…`` or ``sslmode=…``. What a user
reads names the user, host, port and database but never the password; every message goes
through ``core.secrets.redact`` with that password as well.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlsplit

from core.errors import StoreError, StoreUnreachableError
from core.secrets import redact, redact_url

__all__ = ["PgLocation", "connect_error"]


@dataclass(frozen=True)
class PgLocation:
    dsn: str
    """The URL as given (with its password): only ever handed to the driver."""
    user: str | None
    password: str | None
    host: str | None
    port: str | None
    database: str | None

    @classmethod
    def parse(cls, url: str) -> PgLocation:
        try:
            parts = urlsplit(url)
            query = dict(parse_qsl(parts.query, keep_blank_values=True))
            port = str(parts.port) if parts.port is not None else None
        except ValueError as err:
            # The message of a bad port may quote the URL: keep only what is safe.
            raise StoreError(
                f"{_display_netloc_free(url)}: not a valid PostgreSQL URL ({err})"
            ) from None
        if parts.scheme.lower() not in ("postgresql", "postgres"):
            raise StoreError(f"{_display_netloc_free(url)}: not a postgresql:// URL")
        password = parts.password
        if password is not None:
            password = unquote(password)
        password = query.get("password", password)
        database = unquote(parts.path.lstrip("/")) or None
        return cls(
            dsn=url,
            user=query.get("user") or (unquote(parts.username) if parts.username else None),
            password=password or None,
            host=query.get("host") or (parts.hostname or None),
            port=query.get("port") or port,
            database=query.get("dbname") or database,
        )

    @property
    def display(self) -> str:
        """``postgresql://user@host:port/db`` (a socket folder as ``?host=``), no password."""
        user = f"{self.user}@" if self.user else ""
        host = self.host or ""
        socket_dir = host.startswith("/")
        netloc = user + ("" if socket_dir else host) + (f":{self.port}" if self.port else "")
        text = f"postgresql://{netloc}/{self.database or ''}"
        if socket_dir:
            text += f"?host={host}"
        if self.password and self.password in text:  # a password typed where a name goes
            return redact_url(text)
        return text

    def redact(self, text: str) -> str:
        """``text`` (a server's message) with this password and any URL credential hidden."""
        return redact(text, [self.password] if self.password else [])


def _display_netloc_free(url: str) -> str:
    """A URL that failed to parse, shown without anything that may be a credential."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "the database URL"
    host = rest.rpartition("@")[2].partition("/")[0].partition("?")[0]
    return redact(f"{scheme}://{host}/…")


def connect_error(
    location: PgLocation, err: BaseException, what: str = "cannot connect"
) -> StoreError:
    """One line saying why the server could not be used (down, refused login, no such
    database…), naming host and database, never the password."""
    reason = location.redact(_reason(err))
    kind = StoreUnreachableError if _passes(err) else StoreError
    return kind(" ".join(f"{location.display}: {what}: {reason}".split()))


def _passes(err: BaseException) -> bool:
    """Whether ``err`` says the server cannot be reached now (down, restarting, the
    connection cut or timed out), rather than that it refuses us (a login, a database)."""
    import asyncpg

    return isinstance(
        err,
        (
            ConnectionError,  # refused, reset, broken pipe
            FileNotFoundError,  # no socket: the server is not running
            TimeoutError,
            asyncpg.CannotConnectNowError,  # starting up or shutting down
            asyncpg.ConnectionDoesNotExistError,
            asyncpg.AdminShutdownError,
            asyncpg.ConnectionFailureError,
            asyncpg.InternalClientError,  # the driver lost track of a dropped connection
        ),
    )


def _reason(err: BaseException) -> str:
    import asyncpg  # the driver, imported only where a PostgreSQL store is used

    detail = str(err).strip() or type(err).__name__
    if isinstance(err, (ConnectionRefusedError, FileNotFoundError)):
        return "the server is not running or refuses connections"
    if isinstance(err, socket.gaierror):
        return "unknown host"
    if isinstance(err, TimeoutError):
        return "the server did not answer in time"
    if isinstance(err, asyncpg.InvalidPasswordError):
        return f"the server refused the login ({detail})"
    if isinstance(err, asyncpg.InvalidAuthorizationSpecificationError):
        return f"the server refused the login ({detail})"
    if isinstance(err, asyncpg.InvalidCatalogNameError):
        return f"no such database ({detail})"
    if isinstance(err, asyncpg.CannotConnectNowError):
        return f"the server is starting up or shutting down ({detail})"
    if isinstance(err, asyncpg.InternalClientError):  # its words are the driver's state
        return "the connection to the server was lost"
    if isinstance(err, (ConnectionError, asyncpg.ConnectionDoesNotExistError)):
        return f"the connection to the server was lost ({detail})"
    return detail
