"""The demo's distributed checkpoint: 2 rank processes (gloo, CPU) save
their state with torch.distributed.checkpoint and ckptfs.dcp.CkptfsWriter
into STEP (a new checkpoint directory of a run directory on a ckptfs
mount), which commits it for both ranks at once, then load it back from the
run directory's latest with CkptfsReader and compare.

Usage: demo_dcp.py STEP
"""

import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp

import ckptfs
from ckptfs.dcp import CkptfsReader, CkptfsWriter

WORLD = 2


def rank_main(rank, step, port):
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                            rank=rank, world_size=WORLD)
    torch.manual_seed(rank)
    state = {"rank%d.layer%d" % (rank, i): torch.randn(1024, 1024) for i in range(16)}
    t0 = time.time()
    dcp.save(state, storage_writer=CkptfsWriter(step))  # returns once committed
    print("rank %d: saved %d MiB and committed in %.2f s; the checkpoint is %s"
          % (rank, sum(t.numel() * 4 for t in state.values()) >> 20, time.time() - t0,
             ckptfs.state(step)), flush=True)
    back = {k: torch.zeros_like(v) for k, v in state.items()}
    dcp.load(back, storage_reader=CkptfsReader(os.path.dirname(step)))  # its latest
    assert all(torch.equal(back[k], state[k]) for k in state), "differs after load"
    print("rank %d: loaded it back from latest: equal" % rank, flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    mp.spawn(rank_main, args=(sys.argv[1], free_port()), nprocs=WORLD)
