"""bench/run.py never leaves a server behind: not when a scenario fails, not on SIGINT or
SIGTERM, not even when the harness itself is SIGKILLed; and a failed scenario is recorded
with its name and the reason.

Every process the harness starts carries LARDER_BENCH_TAG in its environment; these tests
give it a unique tag and look for that tag in /proc afterwards.
"""

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = os.path.join(ROOT, "bench", "run.py")
LARDER = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "larder")



@pytest.fixture(autouse=True)
def release_build():
    assert os.path.exists(LARDER), f"{LARDER} is missing: scripts/test.sh builds it before pytest"


def tagged(tag, exclude=()):
    """PIDs of live processes whose environment holds LARDER_BENCH_TAG=tag."""
    needle = f"LARDER_BENCH_TAG={tag}".encode()
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) in exclude:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in env and state != "Z":
            out.append(int(pid))
    return out


def wait_for(cond, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    return None


def load_harness(tag, results):
    os.environ["LARDER_BENCH_TAG"] = tag
    os.environ["LARDER_BENCH_RESULTS"] = str(results)
    spec = importlib.util.spec_from_file_location(f"bench_run_{tag.replace('-', '_')}", RUN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_failing_scenario_stops_its_servers_and_says_why(tmp_path):
    tag = f"t-{uuid.uuid4().hex[:12]}"
    h = load_harness(tag, tmp_path)
    started = []

    def broken(c):
        s = h.Server("larder").__enter__()  # never exited by the scenario itself
        started.append(s.proc.pid)
        assert tagged(tag), "the server carries the tag"
        raise h.ScenarioError("the server answered something odd")

    h.SCENARIOS["broken"] = broken
    ok = h.run_scenario("broken", h.Ctx(True, 1, verbose=False), "deadbeef", {"cores": 2})
    assert not ok
    assert started and not tagged(tag), "no server left running"
    with open(tmp_path / "broken.json") as f:
        d = json.load(f)
    assert d["failed"] and d["scenario"] == "broken"
    assert "the server answered something odd" in d["error"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_a_signalled_harness_leaves_no_server(tmp_path, sig):
    tag = f"t-{uuid.uuid4().hex[:12]}"
    env = dict(os.environ, LARDER_BENCH_TAG=tag, LARDER_BENCH_RESULTS=str(tmp_path))
    p = subprocess.Popen([sys.executable, RUN, "--quick", "--no-build", "--no-install", "--no-venv", "latency"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: tagged(tag, exclude={p.pid})), "the harness started a server"
        p.send_signal(sig)
        p.wait(20)
        assert wait_for(lambda: not tagged(tag), timeout=10), f"left running: {tagged(tag)}"
        if sig != signal.SIGKILL:
            assert p.returncode != 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
