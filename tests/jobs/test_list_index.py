"""A domain's job list filtered by status (exports/list, media/transcriptions/list) is counted and paged from one
index, newest first, without a sort (issue 22: < 5 ms at 10,000 rows)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.jobs.conftest import open_env

pytestmark = pytest.mark.anyio


async def test_a_status_filtered_list_reads_the_kind_status_index(tmp_path: Path) -> None:
    async with open_env(tmp_path) as env:
        await env.db.run(
            lambda c: c.executemany(
                "INSERT INTO jobs (job_id, kind, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                [
                    (f"j{i}", "export" if i % 2 else "other", "completed" if i % 3 else "failed", f"t{i:03d}", "t")
                    for i in range(60)
                ],
            )
        )
        seen: list[str] = []
        await env.db.read(lambda c: c.set_trace_callback(seen.append))
        page = await env.jobs.list("export", "completed", limit=5)
        await env.db.read(lambda c: c.set_trace_callback(None))
        assert page.page.total == 20 and [j.job_id for j in page.items] == ["j59", "j55", "j53", "j49", "j47"]
        selects = [s for s in seen if s.startswith("SELECT")]
        assert len(selects) == 2
        for statement in selects:
            plan = await env.db.read(lambda c, s=statement: c.execute("EXPLAIN QUERY PLAN " + s).fetchall())
            details = " | ".join(str(step[-1]) for step in plan)
            assert "jobs_kind_status_created" in details and "TEMP B-TREE" not in details, details
