"""Child Python processes for multi-process tests: run a script with the repo importable,
and read the lines it reports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

__all__ = ["ROOT", "expect_line", "spawn"]


def spawn(script: str, *args: object) -> subprocess.Popen[str]:
    """Run ``python -c script args…`` from the repo root, stdout and stderr piped as text."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def expect_line(proc: subprocess.Popen[str], prefix: str) -> str:
    """The child's next stdout line, which must start with ``prefix`` (else the child is
    killed and the test fails with its stderr)."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith(prefix):
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"child said {line!r}, expected {prefix!r}; stderr:\n{err}")
    return line
