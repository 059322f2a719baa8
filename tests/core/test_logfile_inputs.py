"""``parse_jsonl`` (``dsh import``) against hostile logs, and the timestamp range (issue 12 §7).

Import accepted duplicate JSON keys (even a duplicate ``"seq"``: the last one won), failed on
a huge ``time`` only in the store (no line number), and accepted ``created_at = 2**63-1``,
which pinned the session on top of every list forever.
"""

from __future__ import annotations

import json

import pytest

from core.errors import InvalidEventError
from core.jsoncodec import loads_exact
from core.log import now_ms
from core.logfile import LogImportError, parse_jsonl
from core.timestamps import MAX_EPOCH_MS, check_epoch_ms

HEADER = '{"type":"session","id":"s","created_at":1700000000000,"cwd":null}'


def event(seq: int = 0, time: object = 1700000000001, data: str = "{}") -> str:
    return (
        f'{{"seq":{seq},"type":"note","time":{json.dumps(time)},"data":{data},'
        '"surface_op":null,"source_event_seqs":null}'
    )


def import_error(*lines: str) -> str:
    with pytest.raises(LogImportError) as info:
        parse_jsonl(lines)
    return str(info.value)


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (
            [HEADER, '{"seq":0,' + event(1)[1:]],  # {"seq":0,"seq":1,…}: which one?
            "line 2: invalid JSON (duplicate key 'seq')",
        ),
        (
            [HEADER, event(0, data='{"a":{"b":1,"b":2}}')],
            "line 2: invalid JSON (duplicate key 'b')",
        ),
        (
            [HEADER, event(0, data='[{"k":1},{"k":1,"k":1}]')],
            "line 2: invalid JSON (duplicate key 'k')",
        ),
        (
            ['{"type":"session","id":"s","id":"t","created_at":1,"cwd":null}'],
            "line 1: invalid JSON",
        ),
        (  # an escaped pair is its character (SPEC 4.1)
            [HEADER, event(0, data='{"\\ud83d\\ude00":1,"\\ud83d\\ude00":2}')],
            "line 2: invalid JSON (duplicate key '😀'",
        ),
        (  # raw surrogates take the exact (slow) parser: it checks too
            [HEADER, event(0, data='{"\ud83d\\ude00":1,"\\ud83d\ude00":2}')],
            "line 2: invalid JSON (duplicate key '😀'",
        ),
    ],
)
def test_duplicate_keys_anywhere_are_rejected_with_the_line(
    lines: list[str], expected: str
) -> None:
    assert import_error(*lines).startswith(expected)


def test_a_key_spelt_as_an_escaped_pair_and_as_its_character_is_one_key() -> None:
    # SPEC 4.1: a pair is its character, so these are the same key, given twice.
    assert import_error(HEADER, event(0, data='{"\\ud83d\\ude00":1,"😀":2}')).startswith(
        "line 2: invalid JSON (duplicate key '😀'"
    )
    log = parse_jsonl([HEADER, event(0, data='{"\\ude00\\ud83d":1,"😀":2}')])
    assert dict(log.events[0].data) == {"\ude00\ud83d": 1, "😀": 2}  # a low then a high


def test_the_store_decoder_is_unchanged() -> None:
    """Only import checks for duplicates; reading the store pays nothing for it."""
    assert dict(loads_exact('{"a":1,"a":2}')) == {"a": 2}
    with pytest.raises(ValueError, match="duplicate key 'a'"):
        loads_exact('{"a":1,"a":2}', unique_keys=True)


@pytest.mark.parametrize(
    ("time", "expected"),
    [
        (1e30, "time must be integer epoch milliseconds, got 1e+30"),
        (10**30, "time 1000000000000000000000000000000 is out of range"),
        (2**63 - 1, "is out of range"),
        (10**400, "time a 1329-bit integer is out of range"),
        (-1, "time -1 is out of range"),
        (1.5, "must be integer epoch milliseconds"),
        (True, "must be integer epoch milliseconds"),
        (None, "must be integer epoch milliseconds"),
    ],
)
def test_an_event_time_out_of_range_names_the_line(time: object, expected: str) -> None:
    message = import_error(HEADER, event(0), event(1, time=time), event(2))
    assert message.startswith("line 3: ") and expected in message, message


@pytest.mark.parametrize(
    ("created_at", "expected"),
    [
        (2**63 - 1, "the header's created_at 9223372036854775807 is out of range"),
        (-1, "is out of range"),
        (1e12, "must be integer epoch milliseconds"),
        ("1700000000000", "must be integer epoch milliseconds"),
    ],
)
def test_a_header_created_at_out_of_range_names_line_1(created_at: object, expected: str) -> None:
    header = HEADER.replace("1700000000000", json.dumps(created_at))
    message = import_error(header, event(0))
    assert message.startswith("line 1: ") and expected in message, message


def test_times_from_a_clock_that_ran_ahead_are_kept() -> None:
    # issue 31: nothing may be lost for a clock; the rule is 0 to year 9999 only
    ahead = now_ms() + 400 * 86_400_000
    log = parse_jsonl([HEADER.replace("1700000000000", str(ahead)), event(0, MAX_EPOCH_MS)])
    assert log.header.created_at == ahead and log.events[0].time == MAX_EPOCH_MS


def test_check_epoch_ms_bounds() -> None:
    assert check_epoch_ms(0, "t") == 0
    assert check_epoch_ms(now_ms() + 365 * 86_400_000, "t") > now_ms()
    assert check_epoch_ms(MAX_EPOCH_MS, "t") == MAX_EPOCH_MS
    with pytest.raises(InvalidEventError, match="out of range"):
        check_epoch_ms(MAX_EPOCH_MS + 1, "t")
    for bad in (-1, True, 1.0, "1", None):
        with pytest.raises(InvalidEventError):
            check_epoch_ms(bad, "t")
