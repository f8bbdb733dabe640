"""Demand matching as the service does it: operators, case, versions (core/azure/demands)."""

from __future__ import annotations

import pytest

from gpuci_tui.core.azure.demands import (
    Demand,
    meets,
    parse_demand,
    parse_version,
    unmet,
    waiting_for_agents,
    waiting_reason,
)
from gpuci_tui.core.azure.parse import parse_job_request
from gpuci_tui.core.protocols import JobRequest

H100 = {
    "Agent.Version": "4.264.2",
    "gpu.product": "NVIDIA-H100-80GB-HBM3",
    "gpu.memory": "81559",
    "gpu.family": "hopper",
    "cuda.driver.major": "580",
    "cuda.driver-version.full": "580.159.04",
    "cuda.runtime-version.full": "13.0",
    "mig.capable": "true",
}


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("cuda", Demand("cuda")),
        ("gpu.product -equals NVIDIA-H100-80GB-HBM3", Demand("gpu.product", "equals", "NVIDIA-H100-80GB-HBM3")),
        ("Agent.Version -gtVersion 2.182.1", Demand("Agent.Version", "gtVersion", "2.182.1")),
        ("  gpu.product   -equals   a b ", Demand("gpu.product", "equals", "a b")),  # value keeps its inner space
        ("gpu.product -EQUALS x", None),  # the operator's spelling is exact
        ("gpu.memory -ltVersion 1.0", None),  # no such operator
        ("gpu.product -equals", None),
        ("", None),
    ],
)  # fmt: skip
def test_parse(text: str, parsed: Demand | None) -> None:
    assert parse_demand(text) == parsed


@pytest.mark.parametrize(
    ("demand", "met"),
    [
        # exists
        ("gpu.product", True),
        ("GPU.PRODUCT", True),  # names ignore case
        ("gpu.absent", False),
        # -equals ignores case, of the value too
        ("gpu.product -equals NVIDIA-H100-80GB-HBM3", True),
        ("gpu.product -equals nvidia-h100-80gb-hbm3", True),
        ("Gpu.Family -equals Hopper", True),
        ("gpu.product -equals NVIDIA-A100-80GB-PCIe", False),
        ("gpu.product -equals NVIDIA-H100", False),  # whole value, not a prefix
        ("gpu.absent -equals x", False),
        # -gtVersion is "at least", on .NET versions
        ("cuda.runtime-version.full -gtVersion 12.4", True),
        ("cuda.runtime-version.full -gtVersion 13.0", True),  # equal meets it
        ("cuda.runtime-version.full -gtVersion 13.1", False),
        ("cuda.driver-version.full -gtVersion 550.54.15", True),
        ("cuda.driver-version.full -gtVersion 580.159.4", True),  # 04 is 4
        ("cuda.driver-version.full -gtVersion 580.160", False),
        ("cuda.runtime-version.full -gtVersion 13.0.0", False),  # 13.0 < 13.0.0 in System.Version
        ("Agent.Version -gtVersion 2.182.1", True),
        ("Agent.Version -gtVersion 4.264.2-preview", True),  # suffix dropped
        # one-part numbers are no .NET version: both unparsed compare equal, so always met
        ("cuda.driver.major -gtVersion 600", True),
        # an unparsable capability never meets a parsable demand
        ("gpu.product -gtVersion 1.0", False),
        ("gpu.absent -gtVersion 1.0", False),
        # an operator the service does not know is a demand nobody meets
        ("gpu.product -EQUALS NVIDIA-H100-80GB-HBM3", False),
    ],
)
def test_one_demand_against_an_h100_agent(demand: str, met: bool) -> None:
    assert meets(H100, [demand]) is met


def test_every_demand_must_be_met() -> None:
    demands = ["gpu.product -equals NVIDIA-H100-80GB-HBM3", "gpu.memory -equals 40960"]
    assert not meets(H100, demands)
    assert unmet(H100, demands) == ["gpu.memory -equals 40960"]
    assert meets(H100, [])


@pytest.mark.parametrize(
    ("text", "version"),
    [("1.2", (1, 2)), ("1.2.3.4", (1, 2, 3, 4)), ("12", None), ("1.2.3.4.5", None),
     ("1.x", None), ("2.1-beta", (2, 1)), ("-1.2", None), ("", None)],
)  # fmt: skip
def test_versions_parse_as_system_version(text: str, version: tuple[int, ...] | None) -> None:
    assert parse_version(text) == version


def test_the_reason_names_the_demands_but_not_the_agent_version() -> None:
    reason = waiting_reason(
        ["gpu.product -equals NVIDIA-A100-80GB-PCIe", "Agent.Version -gtVersion 3.0", "cuda"]
    )
    assert reason == "no agent with gpu.product = NVIDIA-A100-80GB-PCIe, cuda"
    assert waiting_reason(["cuda.runtime-version.full -gtVersion 13.1"]) == (
        "no agent with cuda.runtime-version.full >= 13.1"
    )
    assert waiting_reason(["Agent.Version -gtVersion 9.0"]) == "no agent in the pool can take it"


def test_job_requests_carry_demands_and_matched_agents_from_the_wire() -> None:
    queued = parse_job_request(
        {
            "requestId": 890663,
            "queueTime": "2022-09-28T11:20:22.4633333Z",
            "demands": ["cuda", "Agent.Version -gtVersion 2.182.1"],
            "matchesAllAgentsInPool": False,
            "matchedAgents": [{"id": 1755, "name": "gpu-placeholder", "status": "offline"}],
        }
    )
    assert queued.demands == ("cuda", "Agent.Version -gtVersion 2.182.1")
    assert queued.matched_agents == ("gpu-placeholder",)
    # With $top the service leaves matchedAgents out: unknown, not "none".
    assert parse_job_request({"requestId": 1}).matched_agents is None
    # The swagger's {name, value} form is read too.
    swagger = parse_job_request(
        {"requestId": 2, "demands": [{"name": "gpu.family", "value": "hopper"}, {"name": "cuda"}]}
    )
    assert swagger.demands == ("gpu.family -equals hopper", "cuda")


def test_only_queued_jobs_the_service_matched_to_no_agent_are_reported() -> None:
    a100 = ("gpu.product -equals NVIDIA-A100-80GB-PCIe",)
    requests = [
        JobRequest(1, demands=a100, matched_agents=()),
        JobRequest(2, demands=a100, matched_agents=()),
        JobRequest(3, demands=("cuda",), matched_agents=()),
        JobRequest(4, demands=a100, matched_agents=("gpu-1",)),  # an agent will take it
        JobRequest(5, demands=a100, matched_agents=None),  # not said: no evidence
        JobRequest(6, demands=a100, assign_time="2026-11-26T10:00:00Z", matched_agents=()),
    ]
    assert waiting_for_agents(requests) == (
        "no agent with gpu.product = NVIDIA-A100-80GB-PCIe (2 jobs)",
        "no agent with cuda (1 job)",
    )
