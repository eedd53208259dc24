"""One rank of a torch.distributed job (gloo, CPU) that saves Megatron-Core
distributed checkpoints asynchronously through ckptfs.megatron, with
Megatron-Core's own AsyncCallsQueue (or NVIDIA Resiliency Extension's);
started by ranks.py.

Usage: megatron_main.py SCENARIO JSON_ARGS. The queues fork a writer
process per save (persistent=False) and are otherwise CPU-ready except for
two CUDA calls, which these jobs replace: torch.cuda.synchronize (the
device-to-host copy barrier; nothing to wait for on CPU) and
torch.cuda.current_device (where the queues put the one-integer tensors of
their all-reduce; "cpu" for gloo).
"""

import hashlib
import os

from framework_support import rank_main

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

torch.cuda.synchronize = lambda *args, **kwargs: None
torch.cuda.current_device = lambda: "cpu"

from megatron.core import dist_checkpointing  # noqa: E402
from megatron.core.dist_checkpointing import ShardedTensor  # noqa: E402
from megatron.core.dist_checkpointing.strategies.async_utils import AsyncCallsQueue  # noqa: E402

import ckptfs  # noqa: E402
import ckptfs.megatron  # noqa: E402

ROWS = 256  # rows of the sharded weight per rank (x 1024 float32: 1 MiB)


def sharded_state(rank, world, iteration):
    g = torch.Generator().manual_seed(1000 * iteration + rank)
    local = torch.randn(ROWS, 1024, generator=g)
    return {
        "weight": ShardedTensor.from_rank_offsets("weight", local, (0, rank, world)),
        "iteration": iteration,
    }


def digest(tensor):
    return hashlib.sha256(tensor.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()


def scenario_save(rank, world, args):
    """Saves iter_N for N in 1..saves asynchronously, one in flight while
    the next is prepared; reports each checkpoint's state when scheduled
    and after its finalization, then loads the run's latest."""
    run = args["run"]
    queue = AsyncCallsQueue(persistent=False)
    tracker = os.path.join(run, "latest_checkpointed_iteration.txt")
    states = {}
    for iteration in range(1, args["saves"] + 1):
        path = os.path.join(run, "iter_%07d" % iteration)
        request = ckptfs.megatron.save(sharded_state(rank, world, iteration), path,
                                       async_sharded_save=True, keep=args.get("keep"))

        def write_tracker(iteration=iteration, path=path):  # Megatron-LM's, after the commit
            states[iteration]["at_tracker"] = ckptfs.state(path)
            if rank == 0:
                with open(tracker, "w") as f:
                    f.write(str(iteration))

        request.add_finalize_fn(write_tracker)
        queue.schedule_async_request(request)
        states[iteration] = {"scheduled": ckptfs.state(path)}
        queue.maybe_finalize_async_calls(blocking=False)  # the previous one, if done
    queue.maybe_finalize_async_calls(blocking=True)
    queue.close()
    dist.barrier()
    latest = ckptfs.latest(run)
    back = {"weight": ShardedTensor.from_rank_offsets("weight", torch.zeros(ROWS, 1024),
                                                      (0, rank, world))}
    loaded = dist_checkpointing.load(back, latest)
    expected = sharded_state(rank, world, args["saves"])["weight"].data
    with open(tracker) as f:
        tracked = f.read()
    return {"states": states, "latest": latest, "tracker": tracked,
            "loaded_equal": bool(torch.equal(loaded["weight"], expected)),
            "loaded_iteration": loaded.get("iteration"), "digest": digest(expected)}


def scenario_failing_write(rank, world, args):
    """Rank `failing_rank`'s background writes fail (their fsync raises
    EIO): Megatron's finalize raises on every rank before the commit; each
    rank then calls ckptfs.megatron.abort and reports."""
    run = args["run"]
    path = os.path.join(run, "iter_%07d" % 2)
    if rank == args["failing_rank"]:
        def failing_fsync(fd):
            raise OSError(5, "simulated: fsync failed")
        os.fsync = failing_fsync  # what the forked writers call after writing
    queue = AsyncCallsQueue(persistent=False)
    request = ckptfs.megatron.save(sharded_state(rank, world, 2), path, async_sharded_save=True)
    queue.schedule_async_request(request)
    try:
        queue.maybe_finalize_async_calls(blocking=True)
    except BaseException as e:  # DCP's CheckpointException is a BaseException
        removed = ckptfs.megatron.abort(path)
        dist.barrier()
        return {"raised": True, "error": "%s: %s" % (type(e).__name__, e),
                "removed": removed, "exists": os.path.exists(path)}
    return {"raised": False}


def scenario_nvrx(rank, world, args):
    """NVIDIA Resiliency Extension's queue: each rank's torch.save runs in a
    forked process (as its TorchAsyncCheckpoint schedules it) with
    commit_fn as the request's finalize function."""
    from nvidia_resiliency_ext.checkpointing.async_ckpt.core import (AsyncCallsQueue as
                                                                       NvrxQueue, AsyncRequest)
    run = args["run"]
    path = os.path.join(run, "step_%d" % args["step"])
    ckptfs.megatron.prepare(path)
    state = {"weight": sharded_state(rank, world, args["step"])["weight"].data}
    queue = NvrxQueue(persistent=False)
    request = AsyncRequest(torch.save, (state, os.path.join(path, "rank_%d.pt" % rank)),
                           [ckptfs.megatron.commit_fn(path)])
    queue.schedule_async_request(request)
    scheduled = ckptfs.state(path)
    queue.maybe_finalize_async_calls(blocking=True)
    queue.close()
    loaded = torch.load(os.path.join(ckptfs.latest(run), "rank_%d.pt" % rank))
    return {"scheduled": scheduled, "after": ckptfs.state(path),
            "loaded_equal": bool(torch.equal(loaded["weight"], state["weight"]))}


def main():
    rank_main({"save": scenario_save, "failing_write": scenario_failing_write,
               "nvrx": scenario_nvrx},
              init=lambda rank, world: dist.init_process_group("gloo"))


if __name__ == "__main__":
    main()
