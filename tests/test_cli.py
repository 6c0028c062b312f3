"""End-to-end tests of the `envyard` command line.

Every test runs the real CLI in a subprocess against one store (a temporary ENVYARD_HOME shared by the
module, so the host image is set up once). The `host` image mounts an overlay view of `/`, which needs root;
at the end `envyard gc` releases that mount.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the host image needs root (it mounts a view of /)")

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "cli.md"
CMD_TIMEOUT = 60


class CLI:
    """Runs `python -m envyard.cli.main ...` with ENVYARD_HOME pointing at the test store."""

    def __init__(self, home: Path):
        self.home = home
        self.env = {**os.environ, "ENVYARD_HOME": str(home), "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}

    def __call__(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "envyard.cli.main", *args], env=self.env, capture_output=True, text=True,
            input=input, timeout=CMD_TIMEOUT, stdin=None if input is not None else subprocess.DEVNULL,
        )

    def json(self, *args: str, code: int = 0):
        r = self(*args)
        assert r.returncode == code, f"{args}: exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
        return json.loads(r.stdout)


@pytest.fixture(scope="module")
def cli(tmp_path_factory) -> CLI:
    runner = CLI(tmp_path_factory.mktemp("envyard-home"))
    yield runner
    # gc unmounts the host view; if anything kept it alive, do not leave a mount of / inside the tmp dir.
    runner("gc")
    for sub in ("root", "empty"):
        path = runner.home / "host" / sub
        if os.path.ismount(path):
            subprocess.run(["umount", "-l", str(path)], check=False)


def expect(r: subprocess.CompletedProcess, code: int) -> None:
    assert r.returncode == code, f"expected exit {code}, got {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"


def expect_error(r: subprocess.CompletedProcess, code: int) -> None:
    expect(r, code)
    assert "error:" in r.stderr


# ---- help and docs ---------------------------------------------------------------------------------------------


def help_commands(text: str) -> set[str]:
    """Command names from the `Commands` section of a help screen (rich panel or plain click layout)."""
    names, inside = set(), False
    for line in text.splitlines():
        if not inside:
            inside = "Commands" in line
            continue
        body = line.lstrip("│|")
        if line.lstrip().startswith("╰") or (not body.strip() and names):
            break
        m = re.match(r"^ {1,2}([a-z][a-z0-9-]*)(?:\s{2,}|\s*│?\s*$)", body)
        if m:
            names.add(m.group(1))
    return names


def doc_headings() -> list[list[str]]:
    """The command words of every ``#... `envyard X [Y]` `` heading in docs/cli.md."""
    found = []
    for line in DOC.read_text().splitlines():
        m = re.match(r"^#+\s+`envyard ([a-z][a-z0-9 -]*)`\s*$", line)
        if m:
            found.append(m.group(1).split())
    return found


def test_help_lists_exactly_the_documented_commands(cli):
    r = cli("--help")
    expect(r, 0)
    top = help_commands(r.stdout)
    assert {"run", "shell", "ps", "rm", "snapshot", "gc", "images", "rmi", "doctor", "demo", "base", "task",
            "rollout"} <= top

    groups = {"base": {"pull", "import"}, "task": {"check"}}
    for group, expected in groups.items():
        r = cli(group, "--help")
        expect(r, 0)
        assert help_commands(r.stdout) == expected, f"`envyard {group} --help`"

    headings = doc_headings()
    # every command in the help has a heading, and every heading names a real command
    assert top == {words[0] for words in headings}
    for name in top - set(groups):
        assert [name] in headings, f"docs/cli.md has no heading for `envyard {name}`"
    for group, expected in groups.items():
        documented = {words[1] for words in headings if words[0] == group and len(words) > 1}
        assert documented == expected, f"docs/cli.md headings for `envyard {group} ...`"
        assert [group] not in headings, f"`envyard {group}` is a group; document its subcommands"
    assert all(len(words) == 1 or (words[0] in groups and len(words) == 2) for words in headings)

    # the command table at the top names every command (a group by its subcommands, build-cache as itself)
    table = {m.group(1) for m in re.finditer(r"^\| \[`([a-z][a-z0-9 -]*)`\]", DOC.read_text(), re.M)}
    assert {t.split()[0] for t in table} == top
    for group, expected in groups.items():
        assert {t.split()[1] for t in table if t.split()[0] == group and len(t.split()) > 1} == expected


@pytest.mark.parametrize("args", [[], ["run"], ["base"], ["base", "pull"], ["task", "check"], ["build-cache", "ls"],
                                  ["serve"], ["rollout"]])
def test_dash_h_is_help(cli, args):
    # -h prints the same help as --help, on the app, its groups and their commands
    short, long = cli(*args, "-h"), cli(*args, "--help")
    expect(short, 0)
    assert "Usage:" in short.stdout and short.stdout == long.stdout


def test_help_shows_flags_without_a_type_and_one_line_per_command(cli):
    # typer would print `--json <bool>` (as if it took a value) and keep the docstrings' line breaks in the list
    r = cli("run", "--help")
    expect(r, 0)
    flags = [line for line in r.stdout.splitlines() if re.search(r"--json\b|--help\b", line)]
    assert len(flags) == 2 and not any("<bool>" in line for line in flags), flags
    assert "<str>" in r.stdout  # options that take a value keep their type
    assert re.search(r"Usage: .* run \[OPTIONS\] IMAGE CMD\.\.\.\s", r.stdout)  # not typer's `{image} {cmd}...`
    r = cli("--help")
    expect(r, 0)
    assert "<bool>" not in r.stdout
    # pull's docstring breaks its second sentence over two lines; the list shows its first sentence alone
    pull = [line for line in r.stdout.splitlines() if re.match(r"^│ pull\s", line)]
    assert pull and pull[0].rstrip(" │").endswith("without a Docker daemon."), pull


def test_short_help_is_the_first_paragraph_on_one_line_cut_when_long():
    from envyard.cli.helpstyle import SHORT_HELP_MAX, short_help

    assert short_help("Do this. Then\n    that.\n\nMore detail.") == "Do this. Then that."
    long = "First sentence, e.g. with an abbreviation. " + "Second " * 40
    assert len(long) > SHORT_HELP_MAX and short_help(long) == "First sentence, e.g. with an abbreviation."


def test_help_paragraphs_are_wrapped_by_the_terminal_not_by_the_source(cli):
    from envyard.cli.helpstyle import reflow

    assert reflow("First.\n\nOne paragraph\n    over two lines.\n- an item\n  its rest\n- another") == \
        "First.\n\nOne paragraph over two lines.\n- an item its rest\n- another"
    assert reflow("First.\n\n\b\nkept\nas is") == "First.\n\n\b\nkept\nas is"
    r = cli("setup", "--help")  # (COLUMNS=200)
    expect(r, 0)
    # setup's docstring breaks "repaired from" / "snapshots" over two source lines: at 200 columns they meet
    assert re.search(r"failed steps are repaired from snapshots\. Levels:", r.stdout), r.stdout[:1500]


def test_version(cli):
    r = cli("--version")
    expect(r, 0)
    assert r.stdout.startswith("envyard ")


# ---- run ---------------------------------------------------------------------------------------------------------


def test_run_passes_exit_code_through(cli):
    expect(cli("run", "host", "--", "sh", "-c", "exit 7"), 7)


def test_run_prints_output(cli):
    r = cli("run", "host", "--", "echo", "hi")
    expect(r, 0)
    assert r.stdout == "hi\n"


def test_run_options_before_image(cli):
    r = cli("run", "-e", "GREETING=hello", "-w", "/tmp", "host", "sh", "-c", 'echo "$GREETING $PWD"')
    expect(r, 0)
    assert r.stdout == "hello /tmp\n"


def test_run_json_without_separator(cli):
    data = cli.json("run", "--json", "host", "echo", "hi")
    assert data["exit_code"] == 0
    assert data["stdout"] == "hi\n"
    assert data["image"] == "host:latest"
    assert {"sandbox", "stderr", "duration", "timed_out", "truncated", "oom_killed"} <= set(data)


def test_run_json_with_separator(cli):
    data = cli.json("run", "--json", "host", "--", "echo", "hi")
    assert data["exit_code"] == 0
    assert data["stdout"] == "hi\n"


def test_run_json_single_word_is_a_shell_script_and_exit_code_passes(cli):
    data = cli.json("run", "--json", "host", "echo out; echo err >&2; exit 3", code=3)
    assert (data["exit_code"], data["stdout"], data["stderr"]) == (3, "out\n", "err\n")


def test_run_json_timeout(cli):
    data = cli.json("run", "--json", "--timeout", "0.3", "host", "sleep", "30", code=124)
    assert data["timed_out"] is True


def test_run_command_starting_with_dash_is_not_a_sandbox_option(cli):
    # `--hostname evil` used to reach bwrap and rename the sandbox; now it is just a program that does not exist
    r = cli("run", "host", "--hostname", "evil", "hostname")
    expect(r, 127)
    assert "evil" not in r.stdout


def test_run_missing_program_exits_127_in_both_modes(cli):
    r = cli("run", "host", "no-such-program-xyz")
    expect(r, 127)
    assert "no-such-program-xyz" in r.stderr
    data = cli.json("run", "--json", "host", "no-such-program-xyz", "arg", code=127)
    assert data["exit_code"] == 127


def test_run_attached_timeout(cli):
    expect(cli("run", "--timeout", "0.3", "host", "sleep", "30"), 124)


def test_run_bad_timeout(cli):
    expect_error(cli("run", "--timeout", "0", "host", "true"), 125)


def test_run_separator_alone_is_an_envyard_error(cli):
    expect_error(cli("run", "host", "--"), 125)


def test_error_messages_are_not_markup(cli):
    r = cli("run", "-e", "[/x]", "host", "true")
    expect_error(r, 125)
    assert "'[/x]'" in r.stderr and "Traceback" not in r.stderr


def test_run_unknown_image(cli):
    r = cli("run", "nosuch", "--", "true")
    expect_error(r, 125)
    assert "fix:" in r.stderr


@pytest.mark.parametrize("opts", [["--network", "bogus"], ["--memory", "lots"], ["--pids", "1"],
                                  ["--workdir", "relative"], ["--env", "NOEQUALS"]])
def test_run_bad_options_exit_125(cli, opts):
    expect_error(cli("run", *opts, "host", "--", "true"), 125)


def test_run_without_command_is_a_usage_error(cli):
    expect(cli("run", "host"), 2)


# ---- shell -------------------------------------------------------------------------------------------------------


def test_shell_reads_commands_and_passes_exit_code(cli):
    r = cli("shell", "host", input="echo inside-$((40+2))\nexit 5\n")
    expect(r, 5)
    assert "inside-42" in r.stdout


def test_shell_unknown_image(cli):
    expect_error(cli("shell", "nosuch", input=""), 125)


def test_shell_bad_network(cli):
    expect_error(cli("shell", "--network", "bogus", "host", input="exit 0\n"), 125)


# ---- images --------------------------------------------------------------------------------------------------


def test_images_lists_host_after_first_use(cli):
    expect(cli("run", "host", "true"), 0)
    imgs = cli.json("images", "--json")
    host = [i for i in imgs if i["name"] == "host:latest"]
    assert host, imgs
    assert {"layers", "config", "created", "size"} <= set(host[0])


def test_rmi_unknown_image(cli):
    expect_error(cli("rmi", "nosuch"), 3)


def test_rmi_bad_name(cli):
    expect_error(cli("rmi", "Bad Name"), 2)


# ---- sandboxes -------------------------------------------------------------------------------------------------


def test_ps_json_is_a_list(cli):
    assert isinstance(cli.json("ps", "--json"), list)


def test_rm_unknown_sandbox(cli):
    expect_error(cli("rm", "nosuchid"), 3)


def test_rm_tries_every_id(cli):
    assert cli.json("rm", "--json", "nosuch1", "nosuch2", code=3) == {
        "removed": [], "errors": ["no sandbox nosuch1", "no sandbox nosuch2"]}


def test_rmi_tries_every_name_and_exits_with_the_first_failure(cli):
    r = cli("rmi", "nosuch", "Bad Name")
    expect_error(r, 3)
    assert "nosuch:latest" in r.stderr and "'Bad Name'" in r.stderr
    data = cli.json("rmi", "--json", "Bad Name", "nosuch", code=2)
    assert data["removed"] == [] and len(data["errors"]) == 2


def test_rm_kills_a_running_run_sandbox(cli):
    """`envyard run` records its sandbox's pid 1, so `envyard rm` ends the command (exit 137)."""
    runner = subprocess.Popen([sys.executable, "-m", "envyard.cli.main", "run", "host", "sleep", "60"], env=cli.env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        recs = []
        while time.monotonic() < deadline:
            recs = [r for r in cli.json("ps", "--json") if r["owner_pid"] == runner.pid and r["init_pid"]]
            if recs:
                break
            time.sleep(0.1)
        assert recs, "the run sandbox never appeared in `envyard ps` with its init_pid"
        assert cli.json("rm", "--json", recs[0]["id"]) == {"removed": [recs[0]["id"]], "errors": []}
        assert runner.wait(timeout=20) == 137
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()


def test_snapshot_unknown_sandbox(cli):
    expect_error(cli("snapshot", "nosuchid", "--name", "x"), 3)


def test_snapshot_bad_name(cli):
    expect_error(cli("snapshot", "nosuchid", "--name", "Bad Name"), 2)


HOLDER = textwrap.dedent("""
    import sys
    from envyard.yard import Yard
    yard = Yard()
    sb = yard.sandbox("host")
    sb.write_file("/tmp/marker", "from the holder\\n")
    print(sb.id, flush=True)
    sys.stdin.read()
    try:
        sb.close()
    except Exception:
        pass
""")


def test_snapshot_and_rm_a_sandbox_held_by_another_process(cli):
    """A library process owns a sandbox; the CLI sees it, snapshots it and removes it."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], env=cli.env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        sid = holder.stdout.readline().strip()
        assert sid, "holder process did not start a sandbox"
        recs = {r["id"]: r for r in cli.json("ps", "--json")}
        assert recs[sid]["owner_alive"] is True
        assert recs[sid]["owner_pid"] == holder.pid

        img = cli.json("snapshot", sid, "--name", "clitest/snap:v1", "--json")
        assert img["name"] == "clitest/snap:v1"
        assert img["config"]["provenance"]["snapshot_of"] == sid
        r = cli("run", "clitest/snap:v1", "cat", "/tmp/marker")
        expect(r, 0)
        assert r.stdout == "from the holder\n"
        listed = cli("images")
        expect(listed, 0)
        row = {name: next(line for line in listed.stdout.splitlines() if name in line)
               for name in ("clitest/snap:v1", "host:latest")}
        # a snapshot says it is one (and of what), rather than passing for the image it was taken of
        assert "snapshot (host)" in row["clitest/snap:v1"] and "snapshot" not in row["host:latest"], listed.stdout

        assert cli.json("rm", "--json", sid) == {"removed": [sid], "errors": []}
        assert sid not in {r["id"] for r in cli.json("ps", "--json")}
        assert cli.json("rmi", "--json", "clitest/snap:v1") == {"removed": ["clitest/snap:v1"], "errors": []}
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
        cli("rmi", "clitest/snap:v1")


def test_gc_report(cli):
    report = cli.json("gc", "--json")
    assert set(report) == {"sandboxes", "stray_processes", "stray_sandbox_dirs", "stray_subvolumes", "partial_layers",
                           "temporary_images", "unused_layers", "partial_downloads", "trash", "host_view_unmounted",
                           "old_host_masks", "volume_trimmed_bytes", "volume_unmounted", "dedupe"}
    assert set(report["dedupe"]) == {"layers", "files", "bytes", "seconds"}
    assert "dedupe" not in cli.json("gc", "--json", "--no-dedupe")


# ---- doctor and demo -------------------------------------------------------------------------------------------


def test_demo(cli):
    data = cli.json("demo", "--json")
    assert {"create_ms", "first_exec_ms", "snapshot_ms", "fork_per_child_ms", "reset_ms"} <= set(data["timings_ms"])
    assert data["reset"] == "restored"
    assert data["forks_saw_snapshot"] == ["written before the snapshot"] * 4
    assert cli.json("ps", "--json") == []
    assert not [i for i in cli.json("images", "--json") if i["name"].startswith("snapshot/")]


def test_demo_bad_forks_leaves_nothing(cli):
    try:
        expect_error(cli("demo", "--forks", "0"), 2)
        assert not [i for i in cli.json("images", "--json") if i["name"].startswith("snapshot/")]
    finally:
        for img in cli.json("images", "--json"):
            if img["name"].startswith("snapshot/"):
                cli("rmi", img["name"])


def test_doctor(cli):
    report = cli.json("doctor", "--json")
    assert report["ok"] is True
    assert report["images_to_rebuild"] == []  # every image here was made with the numbering
    assert report["home"] == str(cli.home.resolve())


# ---- base ---------------------------------------------------------------------------------------------------------


def test_base_pull_unknown(cli):
    expect_error(cli("base", "pull", "nosuchbase"), 2)


def test_base_pull_host_is_cached(cli):
    assert cli.json("base", "pull", "host", "--json")["name"] == "host:latest"


def test_base_import_missing_file(cli):
    expect_error(cli("base", "import", "/nonexistent", "--name", "x"), 2)


def test_base_import_rootfs_tarball(cli, tmp_path):
    root = tmp_path / "rootfs"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "motd").write_text("imported\n")
    archive = tmp_path / "rootfs.tar"
    subprocess.run(["tar", "-cf", str(archive), "-C", str(root), "."], check=True)
    img = cli.json("base", "import", str(archive), "--name", "clitest/imported", "--json")
    assert img["name"] == "clitest/imported:latest"
    assert img["config"]["provenance"]["provider"] == "import"
    assert "clitest/imported:latest" in {i["name"] for i in cli.json("images", "--json")}
    expect(cli("rmi", "clitest/imported"), 0)


# ---- tasks and rollouts ------------------------------------------------------------------------------------

TASKS = REPO / "examples" / "tasks"
HELLO = TASKS / "hello-file"


def test_task_check_examples(cli):
    r = cli("task", "check", str(TASKS))
    expect(r, 0)
    assert "✗" not in r.stdout
    assert r.stdout.count("✓") == len([d for d in TASKS.iterdir() if (d / "task.toml").is_file()]) > 1


def test_task_check_names_the_bad_field(cli, tmp_path):
    task = tmp_path / "bad-task"
    shutil.copytree(HELLO, task)
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace("[agent]\n", "[agent]\ntimeout_secs = 5\n", 1))
    r = cli("task", "check", str(task))
    expect(r, 2)
    assert "agent.timeout_secs" in r.stdout
    data = cli.json("task", "check", "--json", str(task), str(HELLO), code=2)
    assert (data["tasks"], data["invalid"]) == (2, 1)
    assert any("agent.timeout_secs: unknown field" in p for p in data["problems"][str(task)])
    assert data["problems"][str(HELLO)] == []


def test_task_check_not_a_task(cli, tmp_path):
    expect_error(cli("task", "check", str(tmp_path / "missing")), 2)


def test_rollout_oracle_solves(cli):
    data = cli.json("rollout", str(HELLO), "--policy", "oracle", "--json")
    assert data["summary"]["mean_reward"] == 1.0
    assert data["summary"]["infra_failures"] == 0
    assert data["summary"]["episodes"] == 1 and data["summary"]["solved"] == 1
    [ep] = data["episodes"]
    assert (ep["task"], ep["policy"], ep["reward"], ep["infra_error"]) == ("hello-file", "oracle", 1.0, None)
    assert ep["steps"] > 0


def test_rollout_noop_scores_zero(cli):
    data = cli.json("rollout", str(HELLO), "--policy", "noop", "--json")
    assert data["summary"]["mean_reward"] == 0.0
    assert data["summary"]["solved"] == 0 and data["summary"]["infra_failures"] == 0
    assert [(ep["reward"], ep["steps"]) for ep in data["episodes"]] == [(0.0, 0)]


@pytest.mark.parametrize("opts", [["--policy", "replay:/nonexistent"], ["--concurrency", "0"]])
def test_rollout_bad_options_exit_2(cli, opts):
    expect_error(cli("rollout", str(HELLO), *opts), 2)


def test_rollout_openai_empty_key_is_a_one_line_error(cli):
    empty = CLI(cli.home)
    empty.env["OPENAI_API_KEY"] = ""
    r = empty("rollout", str(HELLO), "--policy", "openai:some-model")
    expect_error(r, 2)
    assert "Traceback" not in r.stderr
    assert r.stderr.splitlines()[0] == "error: OPENAI_API_KEY is set but empty"
    assert r.stderr.splitlines()[1].startswith("fix: set OPENAI_API_KEY to your key, or unset it")


def test_rollout_out_dir(cli, tmp_path):
    out = tmp_path / "out"
    data = cli.json("rollout", str(HELLO), str(HELLO), "--policy", "noop", "--out", str(out), "--json")
    trajectories = sorted(p for p in out.glob("*.jsonl") if p.name != "episodes.jsonl")
    assert len(trajectories) == 2
    assert sorted(p.name for p in out.iterdir()) == sorted([*(p.name for p in trajectories), "summary.json",
                                                            "episodes.jsonl"])
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert sorted((r["reward"], r["metadata"]["attempt"]) for r in records) == [(0.0, 0), (0.0, 1)]  # in order of completion
    assert sorted(ep["trajectory"] for ep in data["episodes"]) == [str(p) for p in trajectories]
    assert json.loads((out / "summary.json").read_text()) == data
    lines = [json.loads(line) for line in trajectories[0].read_text().splitlines()]
    assert lines[0]["role"] == "user"
    assert lines[-1]["role"] == "envyard_result" and lines[-1]["task"] == "hello-file"


def test_rollout_attempts_and_resume(cli, tmp_path):
    out = tmp_path / "out"
    data = cli.json("rollout", str(HELLO), "--attempts", "2", "--out", str(out), "--json")
    assert data["summary"]["attempts"] == 2 and data["summary"]["pass@2"] == 1.0 and data["summary"]["tasks"] == 1
    assert [ep["attempt"] for ep in data["episodes"]] == [0, 1]
    lines = (out / "episodes.jsonl").read_text().splitlines()
    (out / "episodes.jsonl").write_text(lines[0] + "\n")  # as if interrupted after the first episode
    kept = json.loads(lines[0])["metadata"]["attempt"]  # whichever attempt finished first
    again = cli.json("rollout", str(HELLO), "--attempts", "2", "--out", str(out), "--resume", "--json")

    def by_attempt(result):
        return {ep["attempt"]: ep for ep in result["episodes"]}

    assert by_attempt(again)[kept] == by_attempt(data)[kept]  # not run again
    assert again["summary"]["episodes"] == 2 and again["summary"]["pass@2"] == 1.0
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 2
    expect_error(cli("rollout", str(HELLO), "--out", str(out)), 2)  # holds episodes: --resume or another dir
    expect_error(cli("rollout", str(HELLO), "--resume"), 2)
    expect_error(cli("rollout", str(HELLO), "--attempts", "0"), 2)


def test_rollout_infra_failure_exits_1(cli, tmp_path):
    task = tmp_path / "broken-setup"
    shutil.copytree(HELLO, task)
    toml = task / "task.toml"
    toml.write_text(re.sub(r'(?m)^name = .*$', 'name = "clitest-broken-setup"', toml.read_text()))
    (task / "environment").mkdir()
    (task / "environment" / "setup.sh").write_text("exit 3\n")
    data = cli.json("rollout", str(task), "--json", code=1)
    assert data["summary"]["infra_failures"] == 1 and data["summary"]["mean_reward"] is None
    assert [(ep["infra_error"], ep["reward"]) for ep in data["episodes"]] == [("setup_failed", None)]


# ---- store errors ---------------------------------------------------------------------------------------------


def test_unwritable_home_is_a_store_error(cli):
    env = {**cli.env, "ENVYARD_HOME": "/proc/envyard-cannot-exist"}
    r = subprocess.run([sys.executable, "-m", "envyard.cli.main", "ps"], env=env, capture_output=True, text=True,
                       timeout=CMD_TIMEOUT)
    expect_error(r, 7)
    r = subprocess.run([sys.executable, "-m", "envyard.cli.main", "run", "host", "true"], env=env,
                       capture_output=True, text=True, timeout=CMD_TIMEOUT)
    expect_error(r, 125)


def test_piped_tables_never_cut_a_name(cli):
    """A script reading `envyard images | ...` needs whole names, whatever the terminal's width would be."""
    import envyard

    name = "team/" + "long-" * 14 + "name:tag-" + "x" * 30
    yard = envyard.Yard(cli.home)
    host = yard.image("host")
    yard.store.put_image(name, host.layers, host.config)
    env = {k: v for k, v in cli.env.items() if k != "COLUMNS"}  # as in a pipe: no width given
    r = subprocess.run([sys.executable, "-m", "envyard.cli.main", "images"], env=env, capture_output=True,
                       text=True, timeout=CMD_TIMEOUT, stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and name in r.stdout, r.stdout
    expect(cli("rmi", name), 0)
