"""Compose services: pod networks (runtime/podnet.py) and a task's services beside the agent (envs/services.py).

Everything runs for real: sandboxes share a network namespace, services are HTTP servers in sandboxes of the
`host` image, and the Harbor fixture `harbor-compose` builds its images `FROM host`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from envyard import BadInput, ImageConfig, PodNetwork, ServiceError
from envyard.envs.services import (ComposeProject, Healthcheck, Service, Services, compose_healthcheck, duration, image_healthcheck,
                                   load_compose, service_argv)
from envyard.envs.task import inspect_task

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tasks"
FETCH = "python3 -c \"import sys, urllib.request as u; print(u.urlopen(sys.argv[1], timeout=5).read().decode())\" "
SERVE = "python3 -m http.server {port} --bind 0.0.0.0 --directory /srv"


def serve(sb, port: int) -> None:
    """Start a web server in `sb` serving /srv/index.html, and wait until it answers."""
    sb.exec(f"mkdir -p /srv && hostname > /srv/index.html && ({SERVE.format(port=port)} >/tmp/http.log 2>&1 &)")
    deadline = time.monotonic() + 10
    while sb.exec(FETCH + f"http://127.0.0.1:{port}/").exit_code != 0:
        assert time.monotonic() < deadline, "the web server did not come up"
        time.sleep(0.1)


# ---- pod networks ---------------------------------------------------------------------------------------------


def test_pod_members_reach_each_other_by_name_and_nothing_else_reaches_them(yard, host):
    with PodNetwork(["db", "web"]) as pod, yard.sandbox(host, network=pod, hostname="db") as db, \
            yard.sandbox(host, network=pod, hostname="web") as web, yard.sandbox(host) as outsider:
        serve(db, 80)  # root in a sandbox may bind a low port: the pod's namespace is the sandboxes' own
        r = web.exec(FETCH + "http://db/")
        assert (r.exit_code, r.stdout) == (0, "db\n\n")
        assert web.exec("hostname").stdout == "web\n"
        # A sandbox outside the pod neither knows the name nor reaches the port on its own loopback.
        assert outsider.exec(FETCH + "http://db/").exit_code != 0
        assert outsider.exec(FETCH + "http://127.0.0.1:80/").exit_code != 0
        # Without internet the pod has a loopback and nothing else.
        assert web.exec("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '").stdout.split() == ["lo"]


def test_pods_are_separate_from_each_other(yard, host):
    with PodNetwork(["a"]) as one, PodNetwork(["a"]) as two, yard.sandbox(host, network=one, hostname="a") as a1, \
            yard.sandbox(host, network=two) as b2:
        serve(a1, 8080)
        assert b2.exec(FETCH + "http://a:8080/").exit_code != 0  # same name, other pod: nothing listens there


def test_an_internet_pod_gets_out_through_slirp4netns(yard, host):
    if shutil.which("slirp4netns") is None:
        pytest.skip("slirp4netns is not installed (scripts/install.sh installs it)")
    with PodNetwork(["x"], internet=True) as pod, yard.sandbox(host, network=pod) as sb:
        assert sb.exec("cat /etc/resolv.conf").stdout == "nameserver 10.0.2.3\n"
        r = sb.exec(FETCH + "https://pypi.org/simple/six/", timeout=60)
        assert r.exit_code == 0 and "six-" in r.stdout, r.stderr[-500:]


def test_a_closed_pod_or_a_bad_name_is_refused(yard, host):
    pod = PodNetwork(["db"])
    pod.close()
    with pytest.raises(BadInput, match="closed"):
        yard.sandbox(host, network=pod)
    with pytest.raises(BadInput, match="invalid host name"):
        PodNetwork(["bad name"])
    with pytest.raises(BadInput, match="invalid hostname"):
        yard.sandbox(host, hostname="-x")


def test_the_slirp_helper_dies_with_the_pod_and_with_its_owner(tmp_path):
    if shutil.which("slirp4netns") is None:
        pytest.skip("slirp4netns is not installed (scripts/install.sh installs it)")
    owner = textwrap.dedent("""
        import os, signal, sys
        from envyard import PodNetwork
        pod = PodNetwork(["x"], internet=True)
        print(pod._slirp.pid, flush=True)
        if sys.argv[1] == "close":
            pod.close()
            print("closed", flush=True)
            sys.stdin.read()
        os.kill(os.getpid(), signal.SIGKILL)  # an owner that crashes
    """)
    for how in ("close", "crash"):
        p = subprocess.Popen([sys.executable, "-c", owner, how], stdout=subprocess.PIPE, stdin=subprocess.PIPE,
                             text=True)
        slirp = int(p.stdout.readline())
        if how == "close":
            assert p.stdout.readline() == "closed\n"
            assert not _alive(slirp), "closing the pod left slirp4netns running"
            p.stdin.close()
        p.wait(timeout=30)
        deadline = time.monotonic() + 5
        while _alive(slirp) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(slirp), f"slirp4netns outlived its owner ({how})"


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


# ---- reading compose files ------------------------------------------------------------------------------------


def write_compose(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "docker-compose.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_services_depends_on_and_healthchecks_are_read(tmp_path):
    path = write_compose(tmp_path, """
        services:
          main:
            image: host
            depends_on:
              db: {condition: service_healthy}
          db:
            image: postgres:16
            entrypoint: docker-entrypoint.sh
            command: postgres -c 'max_connections=5'
            user: postgres
            working_dir: /var/lib
            environment: [POSTGRES_PASSWORD=pw]
            healthcheck:
              test: pg_isready -U postgres
              interval: 1m30s
              timeout: 500ms
              retries: 7
            volumes: [data:/var/lib/postgresql/data]
            frobnicate: yes
        """)
    project, problems, notes = load_compose(path, "main")
    assert problems == []
    assert project.main_name == "main" and project.main_depends_on == {"db": "service_healthy"}
    (db,) = project.services
    assert (db.image, db.entrypoint, db.command) == ("postgres:16", ["docker-entrypoint.sh"],
                                                     ["postgres", "-c", "max_connections=5"])
    assert (db.user, db.working_dir, db.environment) == ("postgres", "/var/lib", {"POSTGRES_PASSWORD": "pw"})
    assert db.healthcheck == Healthcheck("pg_isready -U postgres", 90.0, 0.5, 7, 0.0)
    assert any("services.db: frobnicate: not used by envyard" in n for n in notes)
    assert any("services.db: volumes: recorded, not acted on" in n for n in notes)


@pytest.mark.parametrize("text, expect", [
    ("services:\n  main: {image: host, depends_on: [nosuch]}\n", "depends_on: no service named 'nosuch'"),
    ("services:\n  main: {image: host}\n  a: {image: x, depends_on: {b: {condition: service_happy}}}\n"
     "  b: {image: y}\n", "condition 'service_happy' is not one of"),
    ("services:\n  main: {image: host}\n  a: {image: x, depends_on: [b]}\n  b: {image: y, depends_on: [a]}\n",
     "depends_on has a cycle: a -> b -> a"),
    ("services:\n  main: {image: host}\n  a: {environment: {X: 1}}\n", "services.a: needs `build` or `image`"),
    ("services:\n  main: {image: host}\n  a: {image: x, healthcheck: {test: [PING, x]}}\n",
     "starts with 'PING'; use CMD, CMD-SHELL or NONE"),
    ("services:\n  main: {image: host}\n  a: {image: x, healthcheck: {test: true, interval: soon}}\n",
     "healthcheck.test: must be a string or a list"),
    ("services:\n  main: {image: host}\n  a: {image: x, build: ./nosuch}\n", "nosuch/Dockerfile: missing"),
    ("services:\n  web: {image: host}\n  db: {image: x}\n", "no service named 'client'"),
])
def test_malformed_compose_files_are_named(tmp_path, text, expect):
    project, problems, _ = load_compose(write_compose(tmp_path, text), None if "client" in expect else "main")
    assert project is None and any(expect in p for p in problems), problems


def test_healthcheck_forms_and_durations():
    assert compose_healthcheck({"test": ["CMD", "curl", "-f", "http://x/"]}).test == ["curl", "-f", "http://x/"]
    assert compose_healthcheck({"test": ["CMD-SHELL", "exit 0"], "start_period": "10s"}).start_period == 10.0
    assert compose_healthcheck({"test": ["NONE"]}) is None
    assert (duration("1h2m3s", 0), duration("250ms", 0), duration(4, 0), duration(None, 7.0)) == (3723.0, 0.25, 4.0,
                                                                                                 7.0)
    with pytest.raises(ValueError, match="not a duration"):
        duration("5 seconds", 0)
    # an image's HEALTHCHECK as Docker records it: nanoseconds
    check = image_healthcheck({"Test": ["CMD-SHELL", "true"], "Interval": 2_000_000_000, "Retries": 4})
    assert (check.test, check.interval, check.timeout, check.retries) == ("true", 2.0, 30.0, 4)
    assert check.bound == 4 * (2.0 + 30.0)


def test_what_a_service_runs_follows_compose():
    image = ImageConfig(entrypoint=["/entry.sh"], cmd=["serve", "--port", "80"])
    assert service_argv(Service("a"), image) == ["/entry.sh", "serve", "--port", "80"]
    assert service_argv(Service("a", command=["run"]), image) == ["/entry.sh", "run"]
    assert service_argv(Service("a", entrypoint=["/other"]), image) == ["/other"]  # the image's CMD is dropped
    assert service_argv(Service("a", entrypoint=[], command=["x"]), image) == ["x"]
    assert service_argv(Service("a"), ImageConfig()) == []


# ---- running services -----------------------------------------------------------------------------------------


def running(yard, host, *services: Service, main_depends_on=None) -> Services:
    project = ComposeProject(main={}, main_name="main", main_depends_on=main_depends_on or {}, services=list(services))
    group = Services(yard, project, internet=False, image_for=lambda service: host, completion_timeout=60.0)
    group.start()
    return group


def test_services_start_in_order_as_their_user_with_their_environment(yard, host):
    web = Service("web", command=["sh", "-c", "pwd; echo $MODE; id -un; exec python3 -m http.server 8000"],
                  user="nobody", working_dir="/srv", environment={"MODE": "fast"},
                  depends_on={"prep": "service_completed_successfully"},
                  healthcheck=Healthcheck(["python3", "-c", "import urllib.request as u; u.urlopen('http://web:8000/')"],
                                          interval=1, timeout=5, retries=10))
    prep = Service("prep", command=["sh", "-c", "sleep 0.5; echo ready > /tmp/flag"])
    group = running(yard, host, web, prep, main_depends_on={"web": "service_healthy"})
    try:
        assert group.sandboxes["prep"].exec("cat /tmp/flag").stdout == "ready\n"  # done before web started
        assert group.log("web").startswith("/srv\nfast\nnobody\n")  # its working_dir, environment and user
        with yard.sandbox(host, network=group.network) as agent:
            assert agent.exec(FETCH + "http://web:8000/").exit_code == 0
    finally:
        group.close()
    assert group.sandboxes == {} and group.network.closed


def test_a_service_that_never_gets_healthy_is_a_clear_error_and_leaves_nothing(yard, host):
    before = {s.id for s in yard.sandboxes()}
    broken = Service("db", command=["sh", "-c", "echo 'FATAL: no config' >&2; exit 3"],
                     healthcheck=Healthcheck("test -e /nonexistent", interval=5, timeout=1, retries=5))
    with pytest.raises(ServiceError, match=r"service 'db' exited; .*FATAL: no config"):
        running(yard, host, broken, main_depends_on={"db": "service_healthy"})
    slow = Service("db", command=["sleep", "60"], healthcheck=Healthcheck("false", interval=0.5, timeout=1, retries=2))
    with pytest.raises(ServiceError, match="was not healthy within 3s"):
        running(yard, host, slow, main_depends_on={"db": "service_healthy"})
    failed = Service("migrate", command=["sh", "-c", "exit 4"])
    with pytest.raises(ServiceError, match="exited with status 4"):
        running(yard, host, failed, main_depends_on={"migrate": "service_completed_successfully"})
    no_check = Service("db", command=["sleep", "60"])
    with pytest.raises(ServiceError, match="has no healthcheck"):
        running(yard, host, no_check, main_depends_on={"db": "service_healthy"})
    with pytest.raises(ServiceError, match="no command to run"):
        running(yard, host, Service("db"))
    yard.wait_closed()  # teardown finishes in the background
    assert {s.id for s in yard.sandboxes()} - before == set()  # none left behind


# ---- a compose task, end to end -------------------------------------------------------------------------------


def test_a_harbor_compose_task_runs_with_its_services(yard):
    from envyard.envs import NoopPolicy, OraclePolicy, TerminalEnv, run_rollouts

    problems, task = inspect_task(FIXTURES / "harbor-compose")
    assert problems == [] and [s.name for s in task.services] == ["api", "seed"]
    before = {s.id for s in yard.sandboxes()}
    (oracle,) = run_rollouts(yard, [FIXTURES / "harbor-compose"], OraclePolicy)
    assert (oracle.reward, oracle.infra_error) == (1.0, None), oracle.infra_detail
    (noop,) = run_rollouts(yard, [FIXTURES / "harbor-compose"], NoopPolicy)
    assert (noop.reward, noop.infra_error) == (0.0, None)
    # The verifier reads the state the agent left in the service; a wrong answer scores 0.
    env = TerminalEnv(FIXTURES / "harbor-compose", yard=yard)
    try:
        env.reset()
        obs, *_ = env.step("hostname; echo $API_URL")
        assert obs.startswith("main\nhttp://api:8080\n")
        env.step("python3 -c \"import urllib.request as u; u.urlopen(u.Request('http://api:8080/answer', "
                 "data=b'envyard', method='PUT'))\"")
        _, reward, terminated, _, info = env.step("submit")
        assert (reward, terminated, info["infra_error"]) == (0.0, True, None)
        assert env.services is None  # stopped with the episode
    finally:
        env.close()
    yard.wait_closed()  # teardown finishes in the background
    assert {s.id for s in yard.sandboxes()} - before == set()  # none left behind


def test_a_compose_task_whose_service_fails_is_an_infrastructure_failure(yard, tmp_path):
    from envyard.envs import OraclePolicy, run_rollouts

    root = tmp_path / "harbor-compose"
    shutil.copytree(FIXTURES / "harbor-compose", root)
    server = root / "environment" / "api" / "server.py"
    server.write_text("raise SystemExit('api: cannot open its database')\n")
    before = {s.id for s in yard.sandboxes()}
    (episode,) = run_rollouts(yard, [root], OraclePolicy)
    assert episode.reward is None and episode.infra_error == "setup_failed"
    assert "service 'api' exited" in episode.infra_detail and "cannot open its database" in episode.infra_detail
    yard.wait_closed()  # teardown finishes in the background
    assert {s.id for s in yard.sandboxes()} - before == set()  # none left behind


def test_a_terminal_bench_task_names_its_client_service(tmp_path):
    root = tmp_path / "tb"
    shutil.copytree(FIXTURES / "tbench-hello", root)
    (root / "docker-compose.yaml").write_text(textwrap.dedent("""
        services:
          client:
            build: {dockerfile: Dockerfile}
            command: ["sh", "-c", "sleep infinity"]
          redis:
            image: redis:7
        """))
    problems, task = inspect_task(root)
    assert problems == [] and task.compose.main_name == "client" and [s.name for s in task.services] == ["redis"]




def test_an_agent_cannot_impersonate_a_service_to_the_verifier(yard, tmp_path):
    """The pod is shared, but the real service holds its port and the agent's processes die before the tests
    run: a fake server the agent starts neither takes the service's port nor survives into verification."""
    from envyard.envs import TerminalEnv

    root = tmp_path / "harbor-compose"
    shutil.copytree(FIXTURES / "harbor-compose", root)
    # These tests also accept the answer from port 9999, where nothing of the task listens.
    (root / "tests" / "test.sh").write_text(
        "#!/bin/bash\nmkdir -p /logs/verifier\n"
        "for url in http://api:8080/answer http://127.0.0.1:9999/answer; do\n"
        f"  a=$({FETCH} $url 2>/dev/null)\n"
        "  [ \"$a\" = drayvne ] && { echo 1 > /logs/verifier/reward.txt; exit 0; }\n"
        "done\necho 0 > /logs/verifier/reward.txt\n")
    fake = ("import http.server as h\n"
            "class H(h.BaseHTTPRequestHandler):\n"
            "    def do_GET(self):\n"
            "        self.send_response(200); self.end_headers(); self.wfile.write(b'drayvne')\n"
            "h.HTTPServer(('0.0.0.0', int(__import__('sys').argv[1])), H).serve_forever()\n")
    env = TerminalEnv(root, yard=yard)
    try:
        env.reset()
        env.step(f"cat > /tmp/fake.py <<'EOF'\n{fake}EOF")
        obs, *_ = env.step("timeout 3 python3 /tmp/fake.py 8080")
        assert "Address already in use" in obs  # the service's port is the service's
        env.step("(setsid python3 /tmp/fake.py 9999 >/dev/null 2>&1 &); sleep 1")
        obs, *_ = env.step(FETCH + "http://127.0.0.1:9999/answer")
        assert obs.startswith("drayvne")  # the fake answers while the agent runs ...
        _, reward, terminated, _, info = env.step("submit")
        assert (reward, terminated, info["infra_error"]) == (0.0, True, None)  # ... and is gone for the tests
    finally:
        env.close()


def test_the_rollout_table_names_why_an_episode_failed(yard, tmp_path):
    root = tmp_path / "harbor-compose"
    shutil.copytree(FIXTURES / "harbor-compose", root)
    (root / "environment" / "api" / "server.py").write_text("raise SystemExit('api: no database')\n")
    r = subprocess.run([sys.executable, "-m", "envyard.cli.main", "rollout", str(root)], capture_output=True,
                       text=True, timeout=300, env={**os.environ, "ENVYARD_HOME": str(yard.store.home)})
    assert r.returncode == 1  # an infrastructure failure
    assert "harbor-compose: setup_failed: " in r.stdout and "api: no database" in r.stdout, r.stdout
