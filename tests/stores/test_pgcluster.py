"""The tests' throwaway PostgreSQL cluster starts and stops as an unprivileged user too.

As root, the suite runs the server as another user; here the cluster code itself runs as an
unprivileged user (``nobody``), as it does for a developer who is not root: ``initdb`` and
``pg_ctl`` run as that user directly, the server answers, and everything is removed."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.pgcluster import Cluster

SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])
from tests.pgcluster import find_binaries, running_cluster
with running_cluster(find_binaries()) as cluster:
    print(cluster.psql("SELECT current_user"), cluster.root, flush=True)
print("root removed:", not cluster.root.exists())
"""


def _python_for(user: pwd.struct_passwd) -> str:
    """An interpreter ``user`` can run (the venv's may live under /root)."""
    for candidate in (sys.executable, "/usr/bin/python3"):
        try:
            probe = subprocess.run(
                [candidate, "-c", "pass"],
                user=user.pw_uid,
                group=user.pw_gid,
                extra_groups=[],
                capture_output=True,
                cwd="/",
            )
        except OSError:  # not even executable for that user
            continue
        if probe.returncode == 0:
            return candidate
    raise AssertionError("no Python interpreter runs as an unprivileged user here")


def test_the_cluster_runs_as_a_non_root_user(pg_cluster: Cluster) -> None:
    # (pg_cluster: this machine has the binaries; skipped or failed with the reason if not.)
    if os.geteuid() != 0:
        assert pg_cluster.psql("SELECT 1") == "1"  # we are that unprivileged user already
        return
    nobody = pwd.getpwnam("nobody")
    # A copy of the cluster code that nobody may read (the work tree and pytest's own temp
    # folders may not be).
    copy = Path(tempfile.mkdtemp(prefix="dsh-nonroot-", dir="/tmp"))
    try:
        (copy / "tests").mkdir()
        here = Path(__file__).resolve().parents[1]
        shutil.copy(here / "pgcluster.py", copy / "tests" / "pgcluster.py")
        (copy / "tests" / "__init__.py").write_text("")
        for path in (copy, copy / "tests"):
            path.chmod(0o755)
        for path in (copy / "tests" / "pgcluster.py", copy / "tests" / "__init__.py"):
            path.chmod(0o644)
        result = _run_as(nobody, copy)
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.splitlines()
    assert first.startswith("dsh /tmp/dshpg-")  # the cluster's superuser role answered
    assert second == "root removed: True"


def _run_as(user: pwd.struct_passwd, copy: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_python_for(user), "-c", SCRIPT, str(copy)],
        user=user.pw_uid,
        group=user.pw_gid,
        extra_groups=[],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp"},
    )
