"""The reference's session-reference URI functions (TypeScript, in a ``fetch``ed mirror of
deepseek-ai/deepseek-harness), run by Node for differential tests: nothing of its code is
kept in this repository; it is read from the mirror and bundled (types stripped by
esbuild) into a temporary directory on each use.

Where it looks: ``DSH_REFERENCE_REPO`` (a git directory or a checkout; default the path
``fetch github:deepseek-ai/deepseek-harness`` gives, ``REFERENCE_DEFAULT``), ``node`` on
``PATH``, and esbuild as ``DSH_ESBUILD`` (a command) or ``npx --yes esbuild``. ``peer()``
is ``None`` when any of them is missing (the tests then skip, saying which).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REFERENCE_DEFAULT = "/work/.mirror/deepseek-ai+deepseek-harness/repo"
_SOURCES = ("src/uri.ts", "src/config.ts")
_PACKAGE = "packages/context/session-reference"

# The entry: one JSON request per line on stdin, one JSON answer per line on stdout.
# Strings travel as JSON, so a lone surrogate is an escape both ways (JSON.stringify is
# well-formed: it escapes each unpaired surrogate).
_ENTRY = """
import { encodeSessionReferenceUri, decodeSessionReferenceUri } from './uri.ts'
import * as readline from 'node:readline'
const lines = readline.createInterface({ input: process.stdin })
lines.on('line', line => {
  const request = JSON.parse(line)
  let answer
  try {
    answer = request.op === 'encode'
      ? { value: encodeSessionReferenceUri(request.arg) }
      : { value: decodeSessionReferenceUri(request.arg) }
  } catch (error) {
    answer = { error: error.code ?? String(error) }
  }
  process.stdout.write(JSON.stringify(answer) + '\\n')
})
"""
_SHIM = "export function SessionId(id) { return id }\n"


class PeerUnavailable(Exception):
    """Why the reference cannot be run here (the reason a test skips with)."""


def _read_source(repo: Path, relative: str) -> str:
    """A file of the reference, from a checkout or else from the git directory's HEAD."""
    checkout = repo / relative
    if checkout.is_file():
        return checkout.read_text(encoding="utf-8")
    done = subprocess.run(
        ["git", f"--git-dir={repo}", "show", f"HEAD:{relative}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise PeerUnavailable(f"{relative} not found in {repo}")
    return done.stdout


def _esbuild() -> list[str]:
    given = os.environ.get("DSH_ESBUILD")
    if given:
        return shlex.split(given)
    if shutil.which("npx") is None:
        raise PeerUnavailable("neither DSH_ESBUILD nor npx is available")
    return ["npx", "--yes", "esbuild"]


def build(workdir: Path) -> Path:
    """The reference's URI functions bundled as one Node script in ``workdir``."""
    repo = Path(os.environ.get("DSH_REFERENCE_REPO", REFERENCE_DEFAULT))
    if not repo.exists():
        raise PeerUnavailable(f"no reference mirror at {repo} (set DSH_REFERENCE_REPO)")
    if shutil.which("node") is None:
        raise PeerUnavailable("node is not installed")
    for relative in _SOURCES:
        target = workdir / Path(relative).name
        target.write_text(_read_source(repo, f"{_PACKAGE}/{relative}"), encoding="utf-8")
    (workdir / "entry.ts").write_text(_ENTRY, encoding="utf-8")
    (workdir / "shim.js").write_text(_SHIM, encoding="utf-8")
    out = workdir / "peer.cjs"
    done = subprocess.run(
        [
            *_esbuild(),
            str(workdir / "entry.ts"),
            "--bundle",
            "--platform=node",
            "--format=cjs",
            f"--alias:@deepseek-ai/dsh-session={workdir / 'shim.js'}",
            f"--outfile={out}",
            "--log-level=error",
        ],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise PeerUnavailable(f"esbuild could not bundle the reference: {done.stderr[-300:]}")
    return out


def ask(requests: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """The reference's answers to ``(op, arg)`` requests (``op`` ``encode`` or
    ``decode``): ``{"value": …}`` or ``{"error": code}`` each, strings as JavaScript
    sees them (read back with ``json.loads``: an escaped pair is its character)."""
    with tempfile.TemporaryDirectory(prefix="dsh-peer-") as tmp:
        script = build(Path(tmp))
        stdin = "".join(json.dumps({"op": op, "arg": arg}) + "\n" for op, arg in requests)
        done = subprocess.run(
            ["node", str(script)],
            input=stdin.encode("ascii"),
            capture_output=True,
            timeout=300,
            check=True,
        )
    lines = done.stdout.decode("utf-8").split("\n")[:-1]  # (not splitlines: U+2028)
    answers = [json.loads(line) for line in lines]
    if len(answers) != len(requests):
        raise AssertionError(f"the reference answered {len(answers)} of {len(requests)}")
    return answers
