"""One-shot exec and create → exec → close for two or more source trees, in lockstep with their floors.

    python benchmarks/exec_ab.py --home /var/tmp/me-store --tree main=/work/main/src --tree new=src --rounds 20

One worker process per tree (PYTHONPATH set to it) keeps a live sandbox of --image; a floor worker keeps a
resident `/bin/sh` in a raw bwrap sandbox over the image's first layer (the benchmarks/sandbox.py floor). Each
round asks every worker in turn for a batch of round trips, so all contenders see the same machine load — the
point on a shared, loaded machine, where runs minutes apart are not comparable. Per exec it reports wall time
and CPU: the owner's (the worker's own process time) and the sandbox's (everything else the worker started: a
cpuacct cgroup, cgroup v1, holds the worker and so every process it starts). Then the same for create → exec("true") → close with the teardown waited for, against
the raw floor (mkdir, bwrap /bin/true, rm). JSON to --json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

CPUACCT = Path("/sys/fs/cgroup/cpuacct")

WORKER = r'''
import json, os, shutil, subprocess, sys, time, uuid
from pathlib import Path
kind, home, image, cg = sys.argv[1:5]
cg = Path(cg)
def usage():
    return int((cg / "cpuacct.usage").read_text())
def adopt(pids):
    for p in pids:
        try:
            (cg / "cgroup.procs").write_text(str(p))
        except OSError:
            pass
adopt([os.getpid()])  # everything this worker starts (bwrap, its sandboxes) is counted in the cgroup too
import envyard
from envyard import janitor, procinfo
y = envyard.Yard(home)
img = y.image(image)
if kind == "floor":
    from envyard.runtime.bwrap import find_bwrap
    bwrap, lower = find_bwrap(), y.store.layer_paths(img.layers)[0]
    scratch = Path(home) / f"exec-ab-{os.getpid()}"
    def args(d, *cmd):
        (d / "upper").mkdir(parents=True); (d / "work").mkdir()
        return [bwrap, "--overlay-src", str(lower), "--overlay", str(d / "upper"), str(d / "work"), "/",
                "--proc", "/proc", "--dev", "/dev", "--unshare-pid", "--unshare-net", *cmd]
    proc = subprocess.Popen(args(scratch / "resident", "/bin/sh"), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    win, rout = proc.stdin.fileno(), proc.stdout.fileno()
    def one():
        os.write(win, b"/bin/true; echo MARK\n"); buf = b""
        while not buf.endswith(b"MARK\n"):
            buf += os.read(rout, 4096)
    one()
    def cycle():
        d = scratch / uuid.uuid4().hex[:12]
        subprocess.run(args(d, "/bin/true"), check=True)
        shutil.rmtree(d)
else:
    sb = y.sandbox(img)
    def one():
        r = sb.exec("true")
        assert r.exit_code == 0, r
    def cycle():
        with y.sandbox(img) as s:
            assert s.exec("true").exit_code == 0
        janitor.wait()
for _ in range(20):
    one()
print("ready", flush=True)
for line in sys.stdin:
    what, n = line.split()
    f = one if what == "exec" else cycle
    walls, c0, u0 = [], time.process_time(), usage()
    for _ in range(int(n)):
        t = time.perf_counter()
        f()
        walls.append(time.perf_counter() - t)
    owner = time.process_time() - c0
    print(json.dumps({"walls": walls, "owner_cpu": owner, "sandbox_cpu": (usage() - u0) / 1e9 - owner}), flush=True)
if kind == "floor":
    proc.stdin.close(); proc.wait(); shutil.rmtree(scratch, ignore_errors=True)
else:
    sb.close(); janitor.wait()
y.close()
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", required=True, help="envyard store holding --image (pulled if missing)")
    ap.add_argument("--image", default="debian:bookworm")
    ap.add_argument("--tree", action="append", required=True, help="NAME=PATH of a source tree (its src dir)")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--batch", type=int, default=25, help="round trips per contender per round")
    ap.add_argument("--cycles", type=int, default=3, help="create → exec → close cycles per contender per round")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    trees = dict(t.split("=", 1) for t in args.tree)
    if not (CPUACCT / "cpuacct.usage").exists():
        sys.exit("needs cgroup v1's cpuacct controller at /sys/fs/cgroup/cpuacct (run as root)")
    first = str(Path(next(iter(trees.values()))).resolve())
    subprocess.run([sys.executable, "-c", "import envyard, sys; envyard.Yard(sys.argv[1]).pull(sys.argv[2])",
                    args.home, args.image], check=True, env={**os.environ, "PYTHONPATH": first})
    workers, groups = {}, []
    try:
        for name, src in [("floor", first), *trees.items()]:
            cg = CPUACCT / f"exec-ab-{os.getpid()}-{name}"
            cg.mkdir()
            groups.append(cg)
            kind = "floor" if name == "floor" else "envyard"
            p = subprocess.Popen([sys.executable, "-c", WORKER, kind, args.home, args.image, str(cg)], text=True,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 env={**os.environ, "PYTHONPATH": str(Path(src).resolve())})
            assert p.stdout.readline().strip() == "ready", f"worker {name} did not start"
            workers[name] = p
        got = {(n, w): {"walls": [], "owner_cpu": 0.0, "sandbox_cpu": 0.0} for n in workers for w in ("exec", "cycle")}
        load = [os.getloadavg()[0]]
        for r in range(args.rounds):
            order = list(workers) if r % 2 == 0 else list(reversed(workers))
            for what, n in (("exec", args.batch), ("cycle", args.cycles)):
                for name in order:
                    p = workers[name]
                    p.stdin.write(f"{what} {n}\n")
                    p.stdin.flush()
                    res = json.loads(p.stdout.readline())
                    g = got[(name, what)]
                    g["walls"] += res["walls"]
                    g["owner_cpu"] += res["owner_cpu"]
                    g["sandbox_cpu"] += res["sandbox_cpu"]
            load.append(os.getloadavg()[0])
    finally:
        for p in workers.values():
            p.stdin.close()
            p.wait(timeout=60)
        time.sleep(0.2)
        for cg in groups:
            try:
                cg.rmdir()
            except OSError as e:
                print(f"could not remove {cg}: {e}", file=sys.stderr)
    out = {"image": args.image, "rounds": args.rounds, "batch": args.batch, "cycles": args.cycles,
           "load_average": {"start": load[0], "max": max(load), "end": load[-1]}, "rows": {}}
    print(f"load average {load[0]:.1f} at the start, {max(load):.1f} at most, {load[-1]:.1f} at the end")
    for what, label in (("exec", "one-shot exec round trip"), ("cycle", "create → exec → close, teardown waited")):
        floor = statistics.median(got[("floor", what)]["walls"])
        print(f"{label}:")
        for name in workers:
            g = got[(name, what)]
            n = len(g["walls"])
            med = statistics.median(g["walls"])
            row = {"median_ms": round(med * 1e3, 3), "p10_ms": round(sorted(g["walls"])[n // 10] * 1e3, 3),
                   "p90_ms": round(sorted(g["walls"])[9 * n // 10] * 1e3, 3), "ratio_to_floor": round(med / floor, 2),
                   "owner_cpu_ms": round(g["owner_cpu"] / n * 1e3, 3), "sandbox_cpu_ms": round(g["sandbox_cpu"] / n * 1e3, 3),
                   "samples": n}
            out["rows"][f"{what}:{name}"] = row
            print(f"  {name:10} median {row['median_ms']:8.3f} ms  ({row['ratio_to_floor']:.2f}× floor)  "
                  f"p10 {row['p10_ms']:.3f}  p90 {row['p90_ms']:.3f}  CPU owner {row['owner_cpu_ms']:.3f} + sandbox "
                  f"{row['sandbox_cpu_ms']:.3f} ms")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
