"""The README's set-up: a newcomer who pastes the run command can then type ``dsh``."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def _blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)\n```", text, flags=re.DOTALL)


def test_the_run_command_puts_dsh_on_path_before_using_it() -> None:
    text = README.read_text(encoding="utf-8")
    run = _blocks(text)[0]
    steps = [step.strip() for step in run.split("&&")]
    activate = next(
        (
            i
            for i, s in enumerate(steps)
            if s in (". .venv/bin/activate", "source .venv/bin/activate")
        ),
        None,
    )
    bare = [i for i, s in enumerate(steps) if s.split()[0] == "dsh"]
    assert bare, "the run command starts dsh"
    assert activate is not None and activate < min(bare), f"dsh is not on PATH in: {run}"
    # and how to get it back in a new shell
    assert "In a new shell, activate it again first" in text


def test_the_test_command_block_keeps_the_shape_ci_reads() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    marker = lines.index("<!-- test-command -->")
    assert lines[marker + 1] == "```sh"
    assert lines[marker + 2] == (
        "python3 -m venv .venv && .venv/bin/pip install -q -e '.[dev]' "
        "&& .venv/bin/python -m pytest -q -n 3"
    )
    assert lines[marker + 3] == "```"
