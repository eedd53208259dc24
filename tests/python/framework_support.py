"""What the framework adapter tests share: on the test side, the bytes the
test cluster's storage servers hold (to see retention give space back) and
waiting for them; on the rank side, the entry point of the *_main.py rank
scripts (the protocol of ranks.py: the last line is "RESULT <json>").

Standard library only, so that the rank scripts import it before their
framework.
"""

import json
import multiprocessing
import os
import sys
import time
import traceback


def stored_bytes(cluster):
    """Bytes of chunk data the cluster's storage servers hold now (apparent
    file sizes under every storage-N/chunks), whatever the host disk does."""
    total = 0
    for name in os.listdir(cluster.state_dir):
        chunks = os.path.join(cluster.state_dir, name, "chunks")
        if not name.startswith("storage-") or not os.path.isdir(chunks):
            continue
        for root, _, files in os.walk(chunks):
            for f in files:
                try:
                    total += os.lstat(os.path.join(root, f)).st_size
                except FileNotFoundError:
                    pass  # removed while walking
    return total


def visible_bytes(cluster):
    """The sizes of every file a listing of the mount shows: what the
    storage servers should hold once removed checkpoints are reclaimed
    (pending checkpoints are hidden; the tests leave none behind)."""
    total = 0
    for root, _, files in os.walk(cluster.mount):
        for f in files:
            path = os.path.join(root, f)
            if not os.path.islink(path):
                total += os.lstat(path).st_size
    return total


def wait_for_space_back(cluster, slack=256 << 10, timeout=60):
    """Waits until the storage servers hold no more than the files the
    mount shows, plus `slack` (space of removed checkpoints comes back after
    the orphan grace, 2 s here); returns (stored, visible) for the caller's
    assertion."""
    deadline = time.monotonic() + timeout
    while True:
        stored, visible = stored_bytes(cluster), visible_bytes(cluster)
        if stored <= visible + slack or time.monotonic() > deadline:
            return stored, visible
        time.sleep(0.5)


def rank_main(scenarios, init=None):
    """Runs scenario argv[1] of `scenarios` with the JSON keyword arguments
    of argv[2] as this rank (RANK, WORLD_SIZE in the environment) and prints
    its report. `init(rank, world)` runs first (e.g. to set up a process
    group the framework does not set up itself). A scenario that raises
    exits 1 without any teardown collective (its peers may be gone)."""
    scenario, args = sys.argv[1], json.loads(sys.argv[2])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    try:
        if init is not None:
            init(rank, world)
        result = scenarios[scenario](rank, world, args)
    except BaseException:
        traceback.print_exc()
        _exit(1)
    print("RESULT " + json.dumps(result), flush=True)
    _exit(0)


def _exit(code):
    """Exits without the interpreter's teardown (frameworks leave threads
    and process groups behind, and peers may be gone), after stopping the
    helper processes this one started (a multiprocessing manager would
    otherwise outlive it and hold ranks.py's output pipe open)."""
    sys.stdout.flush()
    sys.stderr.flush()
    for child in multiprocessing.active_children():
        child.terminate()
        child.join(5)
    os._exit(code)
