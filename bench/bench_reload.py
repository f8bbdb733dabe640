"""Reload benchmark: a new agent image through 8 slots (image present), jobs running meanwhile.

The real `gpuci-tui run` on the real Docker engine, reloaded by SIGHUP (the same reload as
`gpuci-tui reload`, as systemd's ``ExecReload`` sends it), agent containers from the busybox emulator image, the "new image" the same image under a second
tag (never pulled), and a simulated organisation whose agents take the real agent's time to
start (~6 s of registration, ~3 s until the session) unless ``--short-startup``.

Two slots run a long job when the reload arrives and short jobs keep coming during the
roll-out. Measured from the reload:

* every standby lane on the new image (its container started), every idle lane, and the
  whole pool back to steady state (every slot idle with a ready standby, all on the new image);
* the busy slots: their job finishes on the old image, their lanes switch after it;
* the longest time a slot had no agent serving it (online, and busy or enabled): the
  hand-over's gap (disable, re-check, stop the old active, enable the new standby);
* jobs killed or lost (not succeeded, or handed out twice): must be 0.

Usage: python bench/bench_reload.py [--slots 8] [--short-startup] [--baseline]
Writes bench/results/reload.json (``--baseline``: the same jobs without the reload, to
tell the reload's cost from the ``--once`` agents' own; reload_baseline.json) and prints
the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import docker
from bench_engine import launch_daemon, machine, make_world, stop_daemon

from gpuci_tui.core.config.loader import save_config
from gpuci_tui.core.config.paths import socket_path
from gpuci_tui.core.docker.agentspec import LABEL_INSTANCE, LABEL_LANE, LABEL_SLOT, instance_id
from gpuci_tui.core.host.control.client import ControlError, request
from gpuci_tui.sim.image import build_emulator_image
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.records import REALISTIC_STARTUP, AgentStartup

ROOT = Path(__file__).resolve().parent.parent
V2 = "gpuci-bench/agent:v2"


def slot_of(agent: str) -> int:
    """``prefix-3`` and ``prefix-3-b`` are slot 3."""
    return int(agent.removesuffix("-b").rsplit("-", 1)[1])


def wait(pred: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := pred()):
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)
    return value


class Sampler(threading.Thread):
    """Every 50 ms: per slot, does an agent of it serve (online, and busy or enabled)?"""

    def __init__(self, org: SimOrg, pool_id: int, slots: int) -> None:
        super().__init__(daemon=True)
        self.org, self.pool_id, self.slots = org, pool_id, slots
        self.stop = threading.Event()
        self.without: dict[int, float] = {}
        self.longest = dict.fromkeys(range(slots), 0.0)

    def run(self) -> None:
        while not self.stop.is_set():
            now = time.monotonic()
            serving = {
                slot_of(a.name)
                for a in self.org.agents(self.pool_id)
                if a.online and (a.enabled or a.assigned_request is not None)
            }
            for slot in range(self.slots):
                if slot in serving:
                    self.without.pop(slot, None)
                else:
                    since = self.without.setdefault(slot, now)
                    self.longest[slot] = max(self.longest[slot], now - since)
            self.stop.wait(0.05)


def lanes(client: Any, instance: str) -> dict[tuple[int, str], str]:
    listed = client.api.containers(filters={"label": f"{LABEL_INSTANCE}={instance}"})
    return {
        (int(c["Labels"][LABEL_SLOT]), c["Labels"].get(LABEL_LANE, "a")): c["Image"]
        for c in listed
        if c.get("State") == "running"
    }


def snapshot(instance: str) -> dict[str, Any]:
    try:
        reply = request(socket_path(instance), {"op": "status"}, timeout=10)
    except ControlError:
        return {}
    snap: dict[str, Any] = reply.get("snapshot") or {}
    return snap


def steady(instance: str, slots: int) -> bool:
    found = snapshot(instance).get("slots", [])
    return len(found) == slots and all(
        s["state"] == "idle" and s["standby"] == "ready" for s in found
    )


def run(
    client: Any, image: str, *, slots: int, startup: AgentStartup, reload: bool = True
) -> dict[str, Any]:
    """One run; ``reload`` False: the same jobs without a reload (the baseline)."""
    world = make_world(
        slots, 10.0, "rl", client=client, image=image, heartbeat_timeout=15.0, startup=startup,
        standby=True,
    )  # fmt: skip
    org, pool_id, server = world.org, world.pool_id, world.server
    work, config, config_path = world.work, world.config, world.config_path
    instance = instance_id(config)
    world.env["PYTHONPATH"] = str(ROOT)
    # The daemon's control socket lies under its XDG_RUNTIME_DIR: look for it there.
    os.environ["XDG_RUNTIME_DIR"] = world.env["XDG_RUNTIME_DIR"]
    daemon = launch_daemon(world, cwd=ROOT)
    sampler = Sampler(org, pool_id, slots)
    try:
        wait(lambda: steady(instance, slots), 180, "steady state before the reload")
        long_jobs = [org.queue_job(pool_id, duration=30.0) for _ in range(2)]
        wait(lambda: all(org.job(j).assign_time for j in long_jobs), 30, "the long jobs taken")
        busy = {slot_of(org.job(j).agent_name or "") for j in long_jobs}
        wait(lambda: len([s for s in snapshot(instance).get("slots", []) if s["state"] == "busy"])
             == 2, 30, "the daemon sees both jobs")  # fmt: skip
        sampler.start()
        target = V2 if reload else image
        t0, t0_wall = time.monotonic(), time.time()
        if reload:
            save_config(replace(config, agents=replace(config.agents, image=V2)), config_path)
            daemon.send_signal(signal.SIGHUP)
        short_jobs: list[int] = []
        first: dict[tuple[int, str], float] = {}
        idle_lanes = {(n, lane) for n in range(slots) if n not in busy for lane in "ab"}
        every_lane = {(n, lane) for n in range(slots) for lane in "ab"}
        next_job = t0
        while True:
            now = time.monotonic()
            for key, ref in lanes(client, instance).items():
                if ref == target:
                    first.setdefault(key, now - t0)
            if now >= next_job and now - t0 < 25:
                short_jobs.append(org.queue_job(pool_id, duration=2.0))
                next_job = now + 1.0
            done = first.keys() >= every_lane and all(org.job(j).result for j in long_jobs)
            on_target = set(lanes(client, instance).values()) == {target}
            if done and now - t0 > 25 and steady(instance, slots) and on_target:
                all_steady = time.monotonic() - t0
                break
            if now - t0 > 240 or daemon.poll() is not None:
                raise SystemExit(f"the roll-out did not finish; see {work / 'daemon.log'}")
            time.sleep(0.05)
        wait(lambda: all(org.job(j).result for j in short_jobs), 60, "the short jobs")
        sampler.stop.set()
        rollout = (snapshot(instance).get("rollouts") or [{}])[0]
    finally:
        sampler.stop.set()
        stop_daemon(daemon, client, config)
        server.stop()
    jobs = [org.job(j) for j in long_jobs + short_jobs]
    long_ends = [org.job(j).finish_time for j in long_jobs]
    standby_first = {n: min(first[(n, "a")], first[(n, "b")]) for n in range(slots)}
    return {
        "slots": slots,
        "agent_startup_s": [startup.register, startup.session],
        "standby_lanes_on_new_image_s": round(
            max(standby_first[n] for n in range(slots) if n not in busy), 2
        ),
        "idle_lanes_on_new_image_s": round(max(first[k] for k in idle_lanes), 2),
        "all_lanes_on_new_image_s": round(max(first.values()), 2),
        "steady_on_new_image_s": round(all_steady, 2),
        "long_jobs_end_after_reload_s": [round((end or 0) - t0_wall, 1) for end in long_ends],
        "busy_slots_on_new_image_s": round(max(first[(n, lane)] for n in busy for lane in "ab"), 2),
        "longest_slot_without_a_serving_agent_s": round(max(sampler.longest.values()), 2),
        "without_a_serving_agent_per_slot_s": [round(sampler.longest[n], 2) for n in range(slots)],
        "busy_slots": sorted(busy),
        "jobs_during_rollout": len(jobs),
        "jobs_killed_or_lost": sum(
            1 for j in jobs if j.result != "succeeded" or j.assign_count != 1
        ),
        "rollout_state": rollout.get("state"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--short-startup", action="store_true", help="agents start in 1.5 s")
    parser.add_argument("--baseline", action="store_true", help="the same jobs, no reload")
    args = parser.parse_args()
    client = docker.from_env()
    image = build_emulator_image(client)
    client.images.get(image).tag(V2)
    startup = AgentStartup(1.0, 0.5) if args.short_startup else REALISTIC_STARTUP
    try:
        result = run(client, image, slots=args.slots, startup=startup, reload=not args.baseline)
    finally:
        with contextlib.suppress(docker.errors.APIError):  # a container left by a failed run
            client.images.remove(V2)
    out = {"machine": machine(), "result": result}
    (ROOT / "bench" / "results").mkdir(exist_ok=True)
    name = "reload_baseline.json" if args.baseline else "reload.json"
    (ROOT / "bench" / "results" / name).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
