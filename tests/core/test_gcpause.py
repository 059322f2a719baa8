"""``core.gcpause.gc_paused``: the cyclic collector is off inside, and comes back exactly
when the last overlapping pause ends, only if it was on before."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from core.gcpause import gc_paused


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_off_inside_and_back_after() -> None:
    gc.enable()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_back_after_an_exception() -> None:
    gc.enable()
    with pytest.raises(ZeroDivisionError), gc_paused():
        1 / 0  # noqa: B018
    assert gc.isenabled()


def test_stays_off_when_it_was_off_before() -> None:
    gc.disable()
    with gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_overlapping_pauses_resume_when_the_last_ends() -> None:
    gc.enable()
    first = gc_paused()
    second = gc_paused()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # ends before the second: not nested
    assert not gc.isenabled()
    second.__exit__(None, None, None)
    assert gc.isenabled()


def test_pauses_from_many_threads() -> None:
    gc.enable()
    start = threading.Barrier(8)
    seen: list[bool] = []

    def work() -> None:
        start.wait()
        for _ in range(200):
            with gc_paused():
                seen.append(gc.isenabled())

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == [False] * 1600
    assert gc.isenabled()


def test_a_later_pause_starts_afresh() -> None:
    gc.disable()
    with gc_paused():
        pass
    gc.enable()  # someone switched it on meanwhile: the next pause must restore that
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
