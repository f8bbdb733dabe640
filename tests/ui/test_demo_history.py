"""The demo writes a job history of its own, so the history view has content at once."""

from __future__ import annotations

from gpuci_tui.core.store.history import JobQuery, read_history
from gpuci_tui.demo import SEEDED_RUNS, build_demo


def test_the_demo_seeds_its_own_history_with_a_regression_to_spot() -> None:
    env = build_demo(agents=1, jobs_per_minute=0.1, seed=1, startup=(0.0, 0.0))
    try:
        services = env.services()
        assert services.history_path == env.history_path
        assert env.workdir in env.history_path.parents, "never the user's own history"
        rows = read_history(env.history_path, JobQuery(limit=None))
        assert rows is not None and len(rows) == SEEDED_RUNS
        train = read_history(env.history_path, JobQuery(pipeline="train - main", limit=None))
        assert train is not None
        memory = [r.peak_gpu_memory_mib or 0.0 for r in reversed(train)]
        assert memory[-1] > 1.2 * memory[0]
    finally:
        env.close()
