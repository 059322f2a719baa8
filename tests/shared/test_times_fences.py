"""The one time formatter module and the one code-fence module of ``tui.shared``."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from tui.acp.listing import iso_time as acp_iso_time
from tui.acp.text import code_span as acp_code_span
from tui.app.transcript.transcript import format_time
from tui.shared.fences import code_fence, code_span, longest_backtick_run
from tui.shared.times import UNKNOWN_TIME, iso_time, local_minute, utc_minute

MOMENT = 1_764_000_000_123  # 2025-11-24 16:00:00.123 UTC


@pytest.fixture
def berlin() -> Iterator[None]:
    old = os.environ.get("TZ")
    os.environ["TZ"] = "Europe/Berlin"
    time.tzset()
    yield
    if old is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = old
    time.tzset()


def test_local_minute_is_in_the_local_zone_and_utc_minute_says_utc(berlin: None) -> None:
    assert local_minute(MOMENT) == "2025-11-24 17:00"
    assert utc_minute(MOMENT) == "2025-11-24 16:00 UTC"
    assert iso_time(MOMENT) == "2025-11-24T16:00:00.123Z"


@pytest.mark.parametrize("hostile", [10**20, -(10**20), 2**63])
def test_a_time_no_date_can_show_never_raises(hostile: int) -> None:
    assert local_minute(hostile) == UNKNOWN_TIME
    assert utc_minute(hostile) == UNKNOWN_TIME
    assert iso_time(hostile) is None


def test_the_front_ends_use_the_one_module() -> None:
    assert format_time is local_minute
    assert acp_iso_time is iso_time
    assert acp_code_span is code_span


@pytest.mark.parametrize(
    ("text", "run", "fence", "span"),
    [
        ("plain", 0, "```", "`plain`"),
        ("a`b", 1, "```", "``a`b``"),
        ("`x`", 1, "```", "`` `x` ``"),
        (
            "four ```` here",
            4,
            "`````",
            "`````four ```` here`````",
        ),
    ],
)
def test_fences_are_longer_than_any_backtick_run(
    text: str, run: int, fence: str, span: str
) -> None:
    assert longest_backtick_run(text) == run
    assert code_fence(text) == fence
    assert code_span(text) == span
