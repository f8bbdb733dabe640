"""The KEDA export carries the GPU capabilities and the same demands as the host's agents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuci_tui.cli import exitcodes
from gpuci_tui.cli.main import main
from gpuci_tui.core.azure.demands import meets
from gpuci_tui.core.export.k8s_demands import keda_queue_length
from gpuci_tui.core.gpu.capabilities import GpuFacts, HostGpuFacts, slot_capabilities
from gpuci_tui.sim.api import SimPoolApi
from gpuci_tui.sim.org import SimOrg

from .conftest import AGENTS, Render

H100 = GpuFacts(0, "GPU-93cb0da6", "NVIDIA H100 80GB HBM3", 81559, (9, 0), True)
HOST_CAPS = slot_capabilities(HostGpuFacts("580.159.04", (13, 0), (H100,)), (H100,), "gpubox3")


def _trigger(out: dict[str, Any]) -> dict[str, str]:
    (trigger,) = out["ScaledJob"]["spec"]["triggers"]
    metadata: dict[str, str] = trigger["metadata"]
    return metadata


def _pod(out: dict[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = out["ScaledJob"]["spec"]["jobTargetRef"]["template"]["spec"]
    return pod


def test_pods_advertise_the_board_and_run_only_on_nodes_with_it(render: Render) -> None:
    out = render(capabilities=HOST_CAPS)
    pod = _pod(out)
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    advertised = {k: v for k, v in env.items() if k.startswith(("gpu.", "mig."))}
    assert advertised == {
        "gpu.product": "NVIDIA-H100-80GB-HBM3",
        "gpu.memory": "81559",
        "gpu.family": "hopper",
        "gpu.compute.major": "9",
        "gpu.compute.minor": "0",
        "mig.capable": "true",
        "gpu.count": "1",  # the pod's, not the host's
    }
    # Node-specific facts are not promised on a cluster (drivers differ from node to node).
    assert not [k for k in env if k.startswith("cuda.") or k == "gpuci.host"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


def test_keda_counts_the_jobs_these_pods_meet(render: Render) -> None:
    trigger = _trigger(render(capabilities=HOST_CAPS))
    demands = trigger["demands"].split(",")
    assert "gpu.product -equals NVIDIA-H100-80GB-HBM3" in demands
    assert trigger["requireAllDemands"] == "false"
    assert trigger["caseInsensitiveDemandsProcessing"] == "true"
    # Every demand KEDA scales for is one the pod's agent meets (the service agrees).
    env = {
        e["name"]: e["value"]
        for e in _pod(render(capabilities=HOST_CAPS))["containers"][0]["env"]
        if "value" in e
    }
    assert meets(env, demands)


@pytest.mark.parametrize("gpus", ["none"])
def test_no_gpu_no_capabilities_no_demands(render: Render, gpus: str) -> None:
    agents = AGENTS.__class__(**{**AGENTS.__dict__, "gpus": gpus})
    out = render(agents, capabilities=HOST_CAPS)
    assert "demands" not in _trigger(out)
    assert "nodeSelector" not in _pod(out)


def test_without_capabilities_the_export_is_as_before(render: Render) -> None:
    out = render()
    assert "demands" not in _trigger(out) and "nodeSelector" not in _pod(out)


def export(config: Path, *args: str) -> int:
    return main(["--config", str(config), "export", "kubernetes", *args])


def test_the_cli_takes_capabilities(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[azure]\nurl = "https://dev.azure.com/acme"\npool = "gpu"\n\n'
        '[agents]\ncount = 2\nimage = "registry.example/agent:cuda12.8"\n'
        'name_prefix = "gpuhost"\ngpus = "per-agent"\n',
        encoding="utf-8",
    )
    out = tmp_path / "k8s"
    code = export(config, "-o", str(out), "--gpu-capability", "gpu.product=NVIDIA-A100-80GB-PCIe")
    assert code == exitcodes.OK
    (doc,) = yaml.safe_load_all((out / "default-scaledjob.yaml").read_text())
    (trigger,) = doc["spec"]["triggers"]
    assert trigger["metadata"]["demands"] == (
        "gpu.product -equals NVIDIA-A100-80GB-PCIe,gpu.count -equals 1"
    )
    bad = export(config, "-o", str(tmp_path / "x"), "--gpu-capability", "oops")
    assert bad == exitcodes.CONFIG


def test_keda_counts_queued_h100_jobs_of_the_simulated_pool_and_not_the_a100_one(
    render: Render,
) -> None:
    """The sim's job requests, counted with KEDA's rules against the exported trigger."""
    org = SimOrg()
    org.add_pat("pat-0123456789")
    pool = org.add_pool("gpu")
    org.queue_job(pool, demands=("gpu.product -equals nvidia-h100-80gb-hbm3",))  # case ignored
    org.queue_job(pool, demands=("gpu.product -equals NVIDIA-A100-80GB-PCIe",))
    org.queue_job(pool, demands=("gpu.family -equals hopper", "Agent.Version -gtVersion 3.0"))
    org.queue_job(pool, demands=("cuda.runtime-version.full -gtVersion 12.4",))  # KEDA cannot
    org.queue_job(pool)  # no demands: any agent's
    requests = SimPoolApi(org, "pat-0123456789").list_job_requests(pool)
    demands = _trigger(render(capabilities=HOST_CAPS))["demands"]
    assert keda_queue_length(requests, demands) == 3
    assert keda_queue_length(requests, demands, case_insensitive=False) == 2
    assert keda_queue_length(requests, demands, require_all=True) == 0
    assert keda_queue_length(requests, "") == 5  # no demands: every pending job
