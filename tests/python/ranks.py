"""Runs a scenario of rank_main.py (or of another rank script beside it)
as N rank processes of one torch.distributed job (gloo on 127.0.0.1, the
environment torchrun sets), and collects what each rank reported.

Every rank's last line "RESULT <json>" is its report; a rank that exits
non-zero or prints no report keeps its output for the failure message.
Ranks still running at the deadline are killed (by PID, the ones started
here) and the call raises with every rank's output.
"""

import json
import os
import signal
import subprocess
import sys
import time

from cluster import free_port_block

HERE = os.path.dirname(os.path.abspath(__file__))


class RankResult:
    def __init__(self, rank, returncode, output):
        self.rank = rank
        self.returncode = returncode
        self.output = output
        self.report = None
        for line in reversed(output.splitlines()):
            if line.startswith("RESULT "):
                self.report = json.loads(line[len("RESULT "):])
                break

    def __repr__(self):
        return "rank %d (exit %s):\n%s" % (self.rank, self.returncode, self.output[-4000:])


def run_ranks(world, scenario, timeout=300, env=None, script="rank_main.py", **args):
    """Starts `world` ranks of `scenario` of `script` with keyword `args`
    (JSON) and waits for all; returns their RankResults in rank order."""
    port = free_port_block(1)
    procs = []
    for rank in range(world):
        rank_env = dict(os.environ)
        rank_env.update({
            "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port), "PYTHONUNBUFFERED": "1",
            "OMP_NUM_THREADS": "1",
        })
        rank_env.update(env or {})
        # Each rank leads a process group of its own, so that what it
        # started (DCP's background save process, a framework's workers)
        # goes with it.
        procs.append(subprocess.Popen(
            [sys.executable, os.path.join(HERE, script), scenario, json.dumps(args)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=rank_env,
            start_new_session=True))
    deadline = time.monotonic() + timeout
    outputs = [None] * world
    reaped = {}  # rank's PID -> when it was reaped (time.time())
    try:
        for rank, proc in enumerate(procs):
            left = max(1.0, deadline - time.monotonic())
            try:
                out, _ = proc.communicate(timeout=left)
            except subprocess.TimeoutExpired:
                raise TimeoutError("scenario %s: rank %d still running after %d s"
                                   % (scenario, rank, timeout)) from None
            reaped[proc.pid] = time.time()
            outputs[rank] = out.decode("utf-8", "replace")
    except TimeoutError as e:
        _kill_groups(procs, reaped)
        details = []
        for rank, proc in enumerate(procs):
            try:
                out, _ = proc.communicate(timeout=10)
                out = out.decode("utf-8", "replace")
            except subprocess.TimeoutExpired:  # a process of another group holds the pipe
                out = "(output not readable)"
            details.append("rank %d:\n%s" % (rank, (outputs[rank] or out)[-4000:]))
        raise TimeoutError("%s\n%s" % (e, "\n".join(details))) from None
    finally:
        _kill_groups(procs, reaped)  # what the ranks left running
    return [RankResult(rank, proc.returncode, outputs[rank]) for rank, proc in enumerate(procs)]


def _kill_groups(procs, reaped):
    """SIGKILL to every process of the groups the ranks lead (the ranks and
    what they started). In the group of a rank already reaped, a process
    counts only if it started before that: the PID may be someone else's
    once the rank and its group are gone."""
    ticks = os.sysconf("SC_CLK_TCK")
    with open("/proc/stat") as f:
        boot = next(float(line.split()[1]) for line in f if line.startswith("btime "))
    groups = {proc.pid: reaped.get(proc.pid, float("inf")) for proc in procs}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pgid, started = int(fields[2]), boot + int(fields[19]) / ticks
        if pgid in groups and started < groups[pgid]:
            try:
                os.kill(int(name), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def require_all_ok(results):
    """Raises with every rank's output unless each exited 0 with a report."""
    bad = [r for r in results if r.returncode != 0 or r.report is None]
    if bad:
        raise AssertionError("ranks failed:\n" + "\n".join(repr(r) for r in results))
    return [r.report for r in results]
