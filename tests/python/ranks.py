"""Runs a scenario of rank_main.py (or of another rank script beside it)
as N rank processes of one torch.distributed job (gloo on 127.0.0.1, the
environment torchrun sets), and collects what each rank reported.

The ranks are forked from a warm interpreter that has imported the script
once for the whole test file (rank_zygote.py): each is still a process of
its own, leading a process group of its own, with its own environment.

Every rank's last line "RESULT <json>" is its report; a rank that exits
non-zero or prints no report keeps its output for the failure message.
Ranks still running at the deadline are killed (by PID, the ones started
here) and the call raises with every rank's output.
"""

import atexit
import itertools
import json
import os
import shutil
import signal
import tempfile
import time

from cluster import free_port_block
from rank_zygote import Zygote

_zygotes = {}  # script -> its Zygote, for the rest of the test file
_runs = itertools.count()


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


def zygote(script):
    """The warm interpreter of `script`, started at its first use. Set in
    its environment before the script's imports: unbuffered output, one
    OpenMP thread per rank."""
    z = _zygotes.get(script)
    if z is None:
        env = dict(os.environ)
        env.update({"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"})
        z = _zygotes[script] = Zygote(script, env)
    return z


@atexit.register
def stop_zygotes():
    while _zygotes:
        _zygotes.popitem()[1].close()


def run_ranks(world, scenario, timeout=300, env=None, script="rank_main.py", **args):
    """Starts `world` ranks of `scenario` of `script` with keyword `args`
    (JSON) and waits for all; returns their RankResults in rank order.
    `env` is added to each rank's environment (after the script's imports)."""
    port = free_port_block(1)
    warm = zygote(script)
    tag = "run%d" % next(_runs)
    logs = tempfile.mkdtemp(prefix="ckptfs-ranks-")
    pids = []
    codes = {}
    reaped = {}  # rank's PID -> when it was reaped (time.time())
    try:
        for rank in range(world):
            rank_env = dict(os.environ)
            rank_env.update({
                "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
                "LOCAL_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port), "PYTHONUNBUFFERED": "1",
                "OMP_NUM_THREADS": "1",
            })
            rank_env.update(env or {})
            pids.append(warm.start([warm.script, scenario, json.dumps(args)], rank_env,
                                   os.path.join(logs, "rank-%d.log" % rank), tag))
        deadline = time.monotonic() + timeout
        while len(codes) < world and time.monotonic() < deadline:
            for run, pid, code, at in warm.exits(deadline - time.monotonic()):
                if run == tag:
                    codes[pid], reaped[pid] = code, at
        if len(codes) < world:
            _kill_groups(pids, reaped)
            running = [rank for rank, pid in enumerate(pids) if pid not in codes]
            details = "\n".join("rank %d:\n%s" % (rank, _output(logs, rank)[-4000:])
                                for rank in range(world))
            raise TimeoutError("scenario %s: rank %d still running after %d s\n%s"
                               % (scenario, running[0], timeout, details))
        outputs = [_output(logs, rank) for rank in range(world)]
    finally:
        _kill_groups(pids, reaped)  # what the ranks left running
        shutil.rmtree(logs, ignore_errors=True)
    return [RankResult(rank, codes[pid], outputs[rank]) for rank, pid in enumerate(pids)]


def _output(logs, rank):
    try:
        with open(os.path.join(logs, "rank-%d.log" % rank), "rb") as f:
            return f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return "(no output)"


def _kill_groups(pids, reaped):
    """SIGKILL to every process of the groups the ranks (`pids`) lead (the
    ranks and what they started). In the group of a rank already reaped, a
    process counts only if it started before that: the PID may be someone
    else's once the rank and its group are gone."""
    ticks = os.sysconf("SC_CLK_TCK")
    with open("/proc/stat") as f:
        boot = next(float(line.split()[1]) for line in f if line.startswith("btime "))
    groups = {pid: reaped.get(pid, float("inf")) for pid in pids}
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
