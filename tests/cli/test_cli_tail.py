"""``dsh show --tail N``: only the last N items of the conversation."""

from __future__ import annotations

import pytest

from tests.cli.conftest import Run


def test_show_tail_prints_only_the_last_items(dsh: Run) -> None:
    sid = dsh("new").out.strip()
    for word in ("alpha", "bravo", "charlie"):
        assert dsh("send", sid, f"question {word}").code == 0
    whole = dsh("show", sid)
    assert whole.out.count("You · ") == 3
    tail = dsh("show", sid, "--tail", "2")
    assert tail.code == 0, tail.err
    # The last exchange only: its question and its reply, ending as the whole does.
    assert tail.out.count("You · ") == 1
    you = tail.out.index("You · ")
    assert "question charlie" in tail.out[you:]
    assert tail.out.splitlines()[-1] == whole.out.splitlines()[-1]
    assert whole.out.endswith(tail.out[you:])
    everything = dsh("show", sid, "--tail", "1000")
    assert everything.out == whole.out


def test_show_tail_refuses_a_count_that_is_not_positive(
    dsh: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    sid = dsh("new").out.strip()
    for bad in ("0", "-3", "many"):
        with pytest.raises(SystemExit) as info:
            dsh("show", sid, "--tail", bad)
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert "expected a number of items (1 or more)" in err
        assert "Traceback" not in err
