"""``dsh acp`` on a PostgreSQL URL: the ACP session flow, the profile config option and
``session/fork`` run unchanged."""

from __future__ import annotations

from pathlib import Path

from tests.acp.test_acp_fork import (
    test_fork_copies_the_surface_records_the_parent_and_keeps_the_profile as fork_flow,
)
from tests.acp.test_acp_profiles import (
    test_the_profile_is_a_config_option_and_switching_it_changes_the_next_reply as profile_flow,
)
from tests.acp.test_acp_session import (
    test_new_then_prompt_with_a_resource_link_stores_snapshot_then_message as prompt_flow,
)
from tests.pgcluster import Cluster
from tests.storekinds import pg_schema_url


async def test_the_acp_prompt_flow_runs_unchanged_on_postgres(
    tmp_path: Path, pg_cluster: Cluster
) -> None:
    with pg_schema_url(pg_cluster) as url:
        await prompt_flow(tmp_path, url)  # type: ignore[arg-type]  # a location, not a Path


async def test_the_profile_option_and_fork_run_unchanged_on_postgres(
    tmp_path: Path, pg_cluster: Cluster
) -> None:
    with pg_schema_url(pg_cluster) as url:
        await profile_flow(tmp_path, url)  # type: ignore[arg-type]
    with pg_schema_url(pg_cluster) as url:
        await fork_flow(tmp_path, url)  # type: ignore[arg-type]
