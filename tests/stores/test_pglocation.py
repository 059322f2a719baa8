"""How a PostgreSQL location reads in messages: host, port, user and database, never the
password (pure functions: no server needed)."""

from __future__ import annotations

import pytest

from core.errors import StoreError
from stores.postgres.location import PgLocation, connect_error

SECRET = "s3cret-Passw0rd"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://alice@db.example:5433/team", "postgresql://alice@db.example:5433/team"),
        (f"postgresql://alice:{SECRET}@db.example/team", "postgresql://alice@db.example/team"),
        (f"postgres://bob:{SECRET}@/dsh?host=/run/postgresql", "postgresql://bob@/dsh?host=/run/postgresql"),
        (f"postgresql:///dsh?host=/s&user=carol&password={SECRET}", "postgresql://carol@/dsh?host=/s"),
        ("postgresql://h/db?sslmode=require&port=6000", "postgresql://h:6000/db"),
    ],
)  # fmt: skip
def test_display_names_the_server_never_the_password(url: str, shown: str) -> None:
    location = PgLocation.parse(url)
    assert location.display == shown
    assert location.dsn == url  # the driver gets the URL exactly as given


def test_a_password_typed_where_a_name_goes_is_hidden_too() -> None:
    location = PgLocation.parse(f"postgresql://{SECRET}:{SECRET}@h/db")
    assert SECRET not in location.display


@pytest.mark.parametrize(
    "url", [f"postgresql://a:{SECRET}@h:notaport/db", f"mysql://a:{SECRET}@h/db"]
)
def test_a_bad_url_is_one_line_without_the_password(url: str) -> None:
    with pytest.raises(StoreError) as info:
        PgLocation.parse(url)
    assert SECRET not in str(info.value) and "\n" not in str(info.value)


def test_server_text_quoting_the_password_is_redacted() -> None:
    location = PgLocation.parse(f"postgresql://a:{SECRET}@h/db")
    error = connect_error(location, RuntimeError(f"bad\nthing near '{SECRET}'"))
    assert str(error) == "postgresql://a@h/db: cannot connect: bad thing near '***'"
