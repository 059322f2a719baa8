"""The ``llm`` workload's peer: ``llm`` installed into a virtual environment of its own
(never dsh's), and everything run there by subprocess: the load and the search server of
``_llm_driver``, and ``llm`` as a command.

The environment is made once under the cache folder (``$DSH_BENCH_CACHE``, else
``$XDG_CACHE_HOME/dsh-bench``, else ``~/.cache/dsh-bench``) and reused while it holds
``llm`` at ``LLM_VERSION``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

LLM_VERSION = "0.36"
DRIVER = Path(__file__).with_name("_llm_driver.py")


def cache_dir() -> Path:
    if os.environ.get("DSH_BENCH_CACHE"):
        return Path(os.environ["DSH_BENCH_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dsh-bench"


def _installed_version(python: Path) -> str | None:
    if not python.exists():
        return None
    probe = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('llm'))"],
        capture_output=True,
        text=True,
        check=False,
    )
    return probe.stdout.strip() if probe.returncode == 0 else None


def base_python() -> str:
    """The interpreter dsh's own environment was made from (a venv of it is not nested in
    dsh's)."""
    return getattr(sys, "_base_executable", None) or sys.executable


def ensure_llm(cache: Path | None = None) -> Path:
    """The interpreter of a virtual environment holding ``llm==LLM_VERSION`` (made and
    installed with pip on first use, progress on stderr)."""
    venv = (cache or cache_dir()) / f"llm-{LLM_VERSION}"
    python = venv / "bin" / "python"
    if _installed_version(python) == LLM_VERSION:
        return python
    print(f"  llm: installing llm=={LLM_VERSION} into {venv}…", file=sys.stderr, flush=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([base_python(), "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            f"llm=={LLM_VERSION}",
        ],
        check=True,
    )
    found = _installed_version(python)
    if found != LLM_VERSION:
        raise SystemExit(f"bench llm: pip installed llm {found!r}, not {LLM_VERSION}")
    return python


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of every child: no ``DSH_``/``LLM_`` settings of the caller's, and
    bytecode written (this machine sets ``PYTHONDONTWRITEBYTECODE``: without a cache every
    dsh command would compile dsh again, which no installed dsh does)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DSH_", "LLM_", "OPENAI_")) and k != "PYTHONDONTWRITEBYTECODE"
    }
    env.update(extra)
    return env


def llm_load(
    python: Path, corpus: Path, db: Path, env: dict[str, str], *, history: bool = True
) -> dict[str, Any]:
    """Log the corpus into ``db`` through llm's ``LogStore`` (``_llm_driver load``)."""
    flags = [] if history else ["--no-history"]
    out = subprocess.run(
        [str(python), str(DRIVER), "load", str(corpus), str(db), *flags],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"llm load failed: {out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


class SearchServer:
    """``_llm_driver serve DB``: llm's search layer and raw FTS5, timed inside the peer's
    process, one request at a time."""

    def __init__(self, python: Path, db: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [str(python), str(DRIVER), "serve", str(db)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def ask(self, query: str, count: int, reps: int) -> dict[str, Any]:
        stdin: IO[str] | None = self.proc.stdin
        stdout: IO[str] | None = self.proc.stdout
        assert stdin is not None and stdout is not None
        stdin.write(json.dumps({"query": query, "count": count, "reps": reps}) + "\n")
        stdin.flush()
        line = stdout.readline()
        if not line:
            raise RuntimeError(f"llm search server ended (exit {self.proc.poll()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.write("\n")
            self.proc.stdin.close()
        self.proc.wait(timeout=60)

    def __enter__(self) -> SearchServer:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            try:
                self.close()
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def command_seconds(argv: list[str], env: dict[str, str]) -> float:
    """Wall time of one command, its output to a pipe (read whole); a failure raises."""
    started = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, env=env, check=False)
    took = time.perf_counter() - started
    if out.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} exited {out.returncode}: {out.stderr.decode(errors='replace')[-2000:]}"
        )
    return took
