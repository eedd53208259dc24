"""One rank of a torch.distributed job (gloo, CPU) saving and loading a
checkpoint with torch.distributed.checkpoint (DCP); started by ranks.py.

Usage: rank_main.py SCENARIO JSON_ARGS, with RANK, WORLD_SIZE, MASTER_ADDR
and MASTER_PORT in the environment. The last line printed is
"RESULT <json>": what the scenario found, for the test to check.

The state dict is deterministic per rank and world size: tensors of this
rank only (mixed dtypes and shapes, non-contiguous and empty ones), tensors
every rank holds alike (DCP saves them once), a DTensor sharded over the
ranks, and plain Python values.
"""

import contextlib
import errno
import json
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard, distribute_tensor

MiB = 1 << 20


def build_state(rank, world, mib, mesh):
    """About `mib` MiB of this rank's own tensors, plus shared ones."""
    g = torch.Generator().manual_seed(1000 + rank)
    quarter = max(1, mib * MiB // 4)
    own = {
        "embed": torch.randn(quarter // (4 * 1024), 1024, generator=g),
        "w_bf16": torch.randn(quarter // (2 * 1536), 1536, generator=g).to(torch.bfloat16),
        "w_fp16": torch.randn(quarter // (2 * 999), 999, generator=g).to(torch.float16),
        "ids": torch.randint(0, 1 << 40, (quarter // 16,), generator=g, dtype=torch.int64),
        "q": torch.randint(-128, 127, (333, 517), generator=g, dtype=torch.int8),
        "mask": torch.rand(1000, 37, generator=g) > 0.5,
        "scale": torch.tensor(3.25 + rank, dtype=torch.float64),
        "empty": torch.empty(0, 7),
        "transposed": torch.randn(300, 512, generator=g).t(),
    }
    shared_g = torch.Generator().manual_seed(7)
    full = torch.randn(world * 256, 1024, generator=shared_g)
    return {
        "rank%d" % rank: own,
        "shared": {"bias": torch.randn(4096, generator=shared_g), "step": torch.tensor(1000)},
        "sharded": distribute_tensor(full, mesh, [Shard(0)]),
        "extra": {"epoch": 3, "name": "run1", "lrs": [0.1, 0.01]},
    }


def zeros_like_state(state):
    """The same structure, every tensor zeroed (what a load fills in)."""
    if isinstance(state, dict):
        return {k: zeros_like_state(v) for k, v in state.items()}
    if isinstance(state, DTensor):
        return distribute_tensor(torch.zeros(state.shape, dtype=state.dtype),
                                 state.device_mesh, state.placements)
    if isinstance(state, torch.Tensor):
        return torch.zeros_like(state)
    return None


def differences(expected, got, prefix=""):
    """Keys whose loaded value is not bit-exactly the saved one."""
    out = []
    if isinstance(expected, dict):
        for k, v in expected.items():
            if not isinstance(got, dict) or k not in got:
                out.append(prefix + k + " missing")
            else:
                out.extend(differences(v, got[k], prefix + k + "."))
        return out
    if isinstance(expected, DTensor):
        expected, got = expected.to_local(), got.to_local()
    if isinstance(expected, torch.Tensor):
        same = (isinstance(got, torch.Tensor) and got.dtype == expected.dtype
                and got.shape == expected.shape
                and torch.equal(got.contiguous().reshape(-1).view(torch.uint8),
                                expected.contiguous().reshape(-1).view(torch.uint8)))
        if not same:
            out.append(prefix.rstrip(".") + " differs")
        return out
    if got != expected:
        out.append("%s: %r != %r" % (prefix.rstrip("."), got, expected))
    return out


def state_bytes(state):
    if isinstance(state, dict):
        return sum(state_bytes(v) for v in state.values())
    if isinstance(state, DTensor):
        state = state.to_local()
    if isinstance(state, torch.Tensor):
        return state.numel() * state.element_size()
    return 0


def load_and_compare(expected, reader):
    target = zeros_like_state(expected)
    target["extra"] = {"epoch": None, "name": None, "lrs": None}
    dcp.load(target, storage_reader=reader)
    return differences(expected, target)


def save(state, writer, mode):
    """dcp.save ("sync"), or dcp.async_save ("async": in a thread;
    "async_process": in a background process) and its future; for the
    async modes, the number of training steps run while the save was in
    flight."""
    if mode == "sync":
        dcp.save(state, storage_writer=writer)
        return 0
    kwargs = {}
    if mode == "async_process":  # the save runs in a background process
        from torch.distributed.checkpoint.state_dict_saver import AsyncCheckpointerType
        kwargs["async_checkpointer_type"] = AsyncCheckpointerType.PROCESS
    future = dcp.async_save(state, storage_writer=writer, **kwargs)
    steps = 0
    a = torch.randn(256, 256)
    while not future.done():
        a = torch.tanh(a @ a) * 0.5  # training goes on
        steps += 1
    future.result()
    return steps


def scenario_stock(rank, world, mesh, args):
    """The stock FileSystemWriter and FileSystemReader on the given dir."""
    state = build_state(rank, world, args["mib"], mesh)
    writer = FileSystemWriter(args["dir"], thread_count=args["thread_count"],
                              single_file_per_rank=args["single_file_per_rank"],
                              sync_files=args.get("sync_files", True))
    steps = save(state, writer, args["mode"])
    dist.barrier()
    diffs = []
    if args.get("load", True):
        diffs = load_and_compare(state, FileSystemReader(args["dir"]))
    return {"differences": diffs, "bytes": state_bytes(state), "steps_while_saving": steps}


def scenario_ckptfs(rank, world, mesh, args):
    """CkptfsWriter saves step_N of the run for each N of `steps` (or the
    one `step`), in order; right after each dcp.save returns, each rank
    reads the checkpoint's state and the run's latest; then CkptfsReader
    loads the run (its latest). Reports the last save's figures, and
    "after_saves", one entry per step."""
    import ckptfs
    from ckptfs.dcp import CkptfsReader, CkptfsWriter
    state = build_state(rank, world, args["mib"], mesh)
    after_saves = []
    seconds = steps = 0
    for step in args.get("steps", [args.get("step")]):
        path = os.path.join(args["run"], "step_%d" % step)
        writer = CkptfsWriter(path, thread_count=args.get("thread_count", 1),
                              keep=args.get("keep"))
        t0 = time.monotonic()
        try:
            steps = save(state, writer, args["mode"])
        except BaseException as e:  # DCP's CheckpointException is a BaseException
            if not args.get("catch"):
                raise
            return {"raised": True, "error": "%s: %s" % (type(e).__name__, e)}
        seconds = time.monotonic() - t0
        if args.get("check_after", True):
            after_saves.append({"state": ckptfs.state(path),
                                "latest": ckptfs.latest(args["run"])})
    diffs = load_and_compare(state, CkptfsReader(args["run"])) if args.get("load", True) else []
    return {"after_save": after_saves[-1] if after_saves else None, "after_saves": after_saves,
            "differences": diffs, "steps_while_saving": steps, "save_seconds": seconds,
            "bytes": state_bytes(state)}


def scenario_ckptfs_failure(rank, world, mesh, args):
    """Rank `failing_rank` fails in the middle of writing its first file:
    the write raises ENOSPC ("raise") or its process dies ("exit"). The
    others report the error their dcp.save raised."""
    from ckptfs.dcp import CkptfsWriter

    class FailingWriter(CkptfsWriter):
        def write_data(self, plan, planner):
            if rank == args["failing_rank"]:
                real_create_stream = self.fs.create_stream

                @contextlib.contextmanager
                def failing_stream(path, mode):
                    with real_create_stream(path, mode) as stream:
                        stream.write(b"x" * 12345)
                        stream.flush()
                        if args["how"] == "exit":
                            os._exit(17)
                        raise OSError(errno.ENOSPC, "simulated: no space left", str(path))
                        yield stream

                self.fs.create_stream = failing_stream
            return super().write_data(plan, planner)

    state = build_state(rank, world, args["mib"], mesh)
    path = os.path.join(args["run"], "step_%d" % args["step"])
    writer = FailingWriter(path, commit_timeout_s=args.get("commit_timeout_s"))
    try:
        save(state, writer, args["mode"])
    except BaseException as e:  # what DCP raised here (CheckpointException)
        return {"raised": True, "error": "%s: %s" % (type(e).__name__, e)}
    return {"raised": False}


def scenario_ckptfs_load(rank, world, mesh, args):
    """CkptfsReader on `path`: compares against the state of step `step`
    (the same build), or reports the error it raised."""
    from ckptfs.dcp import CkptfsReader
    state = build_state(rank, world, args["mib"], mesh)
    try:
        reader = CkptfsReader(args["path"])
        diffs = load_and_compare(state, reader)
    except Exception as e:
        return {"raised": True, "error": "%s: %s" % (type(e).__name__, e)}
    return {"raised": False, "differences": diffs, "resolved": reader.resolved}


SCENARIOS = {
    "stock": scenario_stock,
    "ckptfs": scenario_ckptfs,
    "ckptfs_failure": scenario_ckptfs_failure,
    "ckptfs_load": scenario_ckptfs_load,
}


def main():
    scenario, args = sys.argv[1], json.loads(sys.argv[2])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        mesh = init_device_mesh("cpu", (world,))
        result = SCENARIOS[scenario](rank, world, mesh, args)
    except Exception:
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(1)  # no teardown collective with ranks that may be gone
    print("RESULT " + json.dumps(result), flush=True)
    if not args.get("teardown", True):
        os._exit(0)  # peers may be gone: no collective, no gloo teardown
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
