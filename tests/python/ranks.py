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
        procs.append(subprocess.Popen(
            [sys.executable, os.path.join(HERE, script), scenario, json.dumps(args)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=rank_env))
    deadline = time.monotonic() + timeout
    outputs = [None] * world
    try:
        for rank, proc in enumerate(procs):
            left = max(1.0, deadline - time.monotonic())
            try:
                out, _ = proc.communicate(timeout=left)
            except subprocess.TimeoutExpired:
                raise TimeoutError("scenario %s: rank %d still running after %d s"
                                   % (scenario, rank, timeout)) from None
            outputs[rank] = out.decode("utf-8", "replace")
    except TimeoutError as e:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        details = []
        for rank, proc in enumerate(procs):
            out, _ = proc.communicate()
            details.append("rank %d:\n%s" % (rank, (outputs[rank] or out.decode(
                "utf-8", "replace"))[-4000:]))
        raise TimeoutError("%s\n%s" % (e, "\n".join(details))) from None
    return [RankResult(rank, proc.returncode, outputs[rank]) for rank, proc in enumerate(procs)]


def require_all_ok(results):
    """Raises with every rank's output unless each exited 0 with a report."""
    bad = [r for r in results if r.returncode != 0 or r.report is None]
    if bad:
        raise AssertionError("ranks failed:\n" + "\n".join(repr(r) for r in results))
    return [r.report for r in results]
