"""Rollouts on a real Ray cluster: two local nodes (tests/raycluster.py), each with its own envyard store, driven
through Ray's public API. The starter tasks score on Ray as they do locally; a node killed mid-rollout loses
no episode and counts none twice; a node never runs more episodes at once than its bound."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'envyard[ray]'); the Ray tests need it")

from envyard.envs.cluster import INFRA_NODE_LOST, INFRA_WORKER, Cluster, pack_task, unpack_task  # noqa: E402
from envyard.envs.rollout import EPISODES_FILE, OraclePolicy, make_policy, read_episodes, run_rollouts  # noqa: E402
from envyard.envs.task import find_tasks  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from raycluster import Skip, local_cluster  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "examples" / "tasks"
SRC = str(ROOT / "src")


_start_failed: list[str] = []


@pytest.fixture(scope="module")
def cluster():
    if _start_failed:  # pytest sets a module fixture up again for each test after it failed: fail fast instead
        pytest.fail(f"the Ray cluster did not start (see the first error): {_start_failed[0]}")
    try:
        with local_cluster(nodes=2, cpus=1) as c:
            ray.init(address=c.address, log_to_driver=False, logging_level="warning")
            try:
                yield c
            finally:
                ray.shutdown()
    except Skip as e:
        pytest.skip(str(e))
    except RuntimeError as e:  # `ray start` failed (tests/raycluster.py says how)
        _start_failed.append(str(e).splitlines()[0][:200])
        raise


def rollout(cluster, tasks, policy, **kw):
    """The episodes, and what each node's worker did (keyed by its store)."""
    with Cluster(address=cluster.address, **kw) as c:
        eps = run_rollouts(None, tasks, make_policy(policy), cluster=c)
    return eps, {s["home"]: s for s in c.nodes.values()}


def held(node) -> set[str]:
    d = node.store / "ray" / "tasks"
    return {p.name for p in d.iterdir()} if d.is_dir() else set()


def test_the_starter_tasks_score_on_ray_as_they_do_locally(cluster, yard):
    tasks = find_tasks([TASKS])
    assert len(tasks) == 13
    local = {p: {e.task: e.reward for e in run_rollouts(yard, tasks, make_policy(p), concurrency=2)}
             for p in ("oracle", "noop")}
    assert set(local["oracle"].values()) == {1.0} and set(local["noop"].values()) == {0.0}

    oracle, stats = rollout(cluster, tasks, "oracle", per_node=2)
    assert {e.task: e.reward for e in oracle} == local["oracle"]
    assert all(e.infra_error is None for e in oracle)
    assert set(stats) == {str(n.store) for n in cluster.nodes}  # each node ran in its own store
    assert sum(s["done"] for s in stats.values()) == 13
    # Each node fetched each task it ran once, and holds it under its store by digest.
    before = {n.name: held(n) for n in cluster.nodes}
    for n in cluster.nodes:
        assert stats[str(n.store)]["fetched"] == len(before[n.name])

    noop, stats = rollout(cluster, tasks, "noop", per_node=2)
    assert {e.task: e.reward for e in noop} == local["noop"]
    # A second rollout of the same tasks fetches only what is new to a node.
    for n in cluster.nodes:
        assert stats[str(n.store)]["fetched"] == len(held(n) - before[n.name])


def live_sandboxes(store: Path) -> int:
    d = store / "sandboxes"
    return sum(1 for p in d.iterdir() if not p.name.startswith(".")) if d.is_dir() else 0


def test_a_node_never_runs_more_episodes_at_once_than_its_bound(cluster):
    task = TASKS / "hello-file"
    peaks = {n.name: 0 for n in cluster.nodes}
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            for n in cluster.nodes:
                peaks[n.name] = max(peaks[n.name], live_sandboxes(n.store))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        eps, stats = rollout(cluster, [task] * 24, "noop", per_node=2)
    finally:
        stop.set()
        watcher.join()
    assert len(eps) == 24 and all(e.reward == 0.0 for e in eps)
    assert sorted(e.attempt for e in eps) == list(range(24))
    for s in stats.values():  # each worker reached its bound and never went past it
        assert s["peak"] == s["slots"] == 2
    # An episode has at most three sandboxes: the agent's, its verifier prepared ahead, and a fresh verifier when
    # the prepared one cannot be used (envs/prepared.py).
    assert all(p <= 3 * 2 for p in peaks.values()), peaks
    assert all(p >= 1 for p in peaks.values()), peaks


def test_a_node_killed_mid_rollout_loses_no_episode_and_counts_none_twice(cluster, tmp_path):
    late = cluster.add_node("late")  # joins after the others: gets its tasks on first use
    out = tmp_path / "out"
    tasks = [TASKS / "hello-file", TASKS / "count-lines"] * 8
    result: dict = {}

    class SlowOracle(OraclePolicy):  # defined here, so Ray ships it by value
        def act(self, observation):
            time.sleep(1.0)  # an episode stays on its node long enough to be there when the node is killed
            return super().act(observation)

    def run():
        try:
            with Cluster(address=cluster.address, per_node=1, retries=3) as c:
                result["episodes"] = run_rollouts(None, tasks, SlowOracle, out_dir=out, cluster=c)
        except BaseException as e:  # handed to the test thread
            result["error"] = e

    t = threading.Thread(target=run)
    t.start()
    deadline = time.monotonic() + 120
    while live_sandboxes(late.store) == 0 and t.is_alive():
        assert time.monotonic() < deadline, "the late node never started an episode"
        time.sleep(0.05)
    assert t.is_alive(), f"the rollout ended before the late node could be killed: {result}"
    assert held(late)  # it fetched its task by digest
    cluster.kill_node("late")
    t.join(timeout=240)
    assert not t.is_alive()
    assert "error" not in result, result.get("error")

    eps = result["episodes"]
    keys = [(e.task_dir, e.attempt) for e in eps]
    assert len(eps) == 16 and len(set(keys)) == 16
    assert {(str(p.resolve()), a) for p, a in zip(tasks, [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7])} == set(keys)
    # Retried on a live node (reward 1), or reported as lost — never silently missing, never a made-up score.
    assert all(e.reward == 1.0 or e.infra_error == INFRA_NODE_LOST for e in eps)
    assert any(e.metrics.get("retries") for e in eps), "the killed node was running an episode: it must be retried"
    records = read_episodes(out / EPISODES_FILE)
    assert sorted((r["metadata"]["task_dir"], r["metadata"]["attempt"]) for r in records) == sorted(keys)
    assert len(list(out.glob("*-*.jsonl"))) == 16  # one trajectory per episode, none from the lost run


def test_an_episode_that_raises_on_its_node_is_a_typed_failure_after_its_retries(cluster):
    class Broken:  # defined here, so Ray ships it by value
        name = "broken"

        def start(self, task, instruction):
            pass

        def act(self, observation):
            raise RuntimeError("policy bug")

    with Cluster(address=cluster.address, per_node=1, retries=1, resource="envyard_head") as c:
        [ep] = run_rollouts(None, [TASKS / "hello-file"], Broken, cluster=c)
        done = sum(s["done"] for s in c.nodes.values())
    assert ep.reward is None and ep.infra_error == INFRA_WORKER and "policy bug" in ep.infra_detail
    assert done == 2  # the first try and one retry


def test_a_vector_env_on_the_cluster_spreads_its_environments_over_the_nodes(cluster):
    from envyard.envs.vector import VectorTerminalEnv

    tasks = [TASKS / "hello-file", TASKS / "count-lines"] * 2
    venv = VectorTerminalEnv(tasks, cluster=Cluster(address=cluster.address, resource=None))
    try:
        obs, infos = venv.reset(seed=1)
        assert "hello" in obs[0].lower() and all(o for o in obs)
        assert not any(infos["infra_error"])
        # two environments on each node: two agent sandboxes, plus the verifiers being prepared beside them
        assert all(2 <= live_sandboxes(n.store) <= 4 for n in cluster.nodes[:2])
        obs, rewards, terminated, truncated, infos = venv.step(["echo hi > /tmp/x && cat /tmp/x"] * 4)
        assert all("hi" in o for o in obs) and not terminated.any()
        obs, rewards, terminated, truncated, infos = venv.step(["submit"] * 4)
        assert terminated.all() and list(rewards) == [0.0] * 4  # nothing done: the verifiers say 0
    finally:
        venv.close()
    assert [live_sandboxes(n.store) for n in cluster.nodes[:2]] == [0, 0]


def test_a_task_travels_by_digest_and_a_tampered_copy_is_refused(tmp_path):
    digest, data = pack_task(TASKS / "python-env-repair")
    assert pack_task(TASKS / "python-env-repair") == (digest, data)  # the same files, the same bytes
    got = unpack_task(tmp_path, digest, "python-env-repair", lambda: data)
    assert (got / "task.toml").read_bytes() == (TASKS / "python-env-repair" / "task.toml").read_bytes()
    assert unpack_task(tmp_path, digest, "python-env-repair", lambda: pytest.fail("fetched twice")) == got
    from envyard.errors import ClusterError

    with pytest.raises(ClusterError, match="sha256"):
        unpack_task(tmp_path, "0" * 64, "x", lambda: data)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".new-")]


def cli(*args, env=None):
    return subprocess.run([sys.executable, "-c", "from envyard.cli.main import app; app()", *map(str, args)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": SRC, **(env or {})})


def test_envyard_rollout_ray_runs_on_the_cluster(cluster, tmp_path):
    r = cli("rollout", "--ray", cluster.address, "--per-node", "1", "--json", TASKS / "hello-file",
            TASKS / "csv-sum", env={"ENVYARD_HOME": str(tmp_path / "driver-store")})
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["summary"]["solved"] == 2 and data["summary"]["infra_failures"] == 0
    assert not (tmp_path / "driver-store" / "sandboxes").exists()  # the driver ran nothing itself


@pytest.mark.parametrize("args, code, message", [
    (["--per-node", "2"], 2, "--per-node needs --ray"),
    (["--ray", "auto", "--backend", "docker"], 2, "local backend of each node"),
    (["--ray", "not-an-address"], 2, "HOST:PORT"),
    (["--ray", "127.0.0.1:1"], 23, "no Ray cluster at 127.0.0.1:1"),
])
def test_bad_ray_options_fail_with_one_line(args, code, message, tmp_path):
    r = cli("rollout", *args, TASKS / "hello-file", env={"ENVYARD_HOME": str(tmp_path / "s")})
    assert r.returncode == code, r.stderr
    assert message in r.stderr or message in r.stdout
    assert "Traceback" not in r.stderr
