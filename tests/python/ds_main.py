"""One rank of a DeepSpeed job on CPU (DS_ACCELERATOR=cpu, gloo, ZeRO stage
1 over a torch AdamW) that saves through ckptfs.deepspeed; started by
ranks.py.

Usage: ds_main.py SCENARIO JSON_ARGS. DeepSpeed's CPU communication
backend compiles a shared-memory all-reduce kernel at the first
init_distributed (about 90 s on two cores); these jobs replace it by gloo's
(build_shm_op returns None, as where the kernel is unavailable).
"""

import hashlib
import os
import time

from framework_support import rank_main

os.environ.setdefault("DS_ACCELERATOR", "cpu")

import importlib  # noqa: E402

import torch  # noqa: E402
import deepspeed  # noqa: E402

import ckptfs  # noqa: E402
import ckptfs.deepspeed  # noqa: E402

# deepspeed.comm re-exports the name torch: get the backend module itself.
importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None


def params_digest(module):
    h = hashlib.sha256()
    for name, p in sorted(module.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def make_engine(args):
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.Tanh(),
                                torch.nn.Linear(512, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    config = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1,
              "zero_optimization": {"stage": 1}, "steps_per_print": 1 << 30}
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
    kwargs = {}
    if args.get("keep") is not None:
        kwargs["keep"] = args["keep"]
    ckptfs.deepspeed.install(engine, **kwargs)
    return engine


def train_steps(engine, rank, n):
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(n):
        x = torch.randn(4, 256, generator=g)
        loss = (engine(x) - x[:, :1]).pow(2).mean()
        engine.backward(loss)
        engine.step()


def ds_latest(run):
    try:
        with open(os.path.join(run, "latest")) as f:
            return f.read().strip()
    except OSError as e:
        return "error: %s" % e.strerror


def scenario_save(rank, world, args):
    """Trains and saves tag step<N> every `every` steps, `saves` times;
    after each save records the tag's state and DeepSpeed's `latest`. Then
    loads the newest tag into a fresh engine (from DeepSpeed's `latest`, or
    from ckptfs.deepspeed.latest_tag with save_latest=False)."""
    run = args["run"]
    engine = make_engine(args)
    after = {}
    for i in range(args["saves"]):
        train_steps(engine, rank, args["every"])
        tag = "step%d" % engine.global_steps
        engine.save_checkpoint(run, tag=tag, client_state={"tag": tag},
                               save_latest=args["save_latest"])
        after[tag] = {"state": ckptfs.state(os.path.join(run, tag)),
                      "ds_latest": ds_latest(run) if args["save_latest"] else None}
    saved_digest = params_digest(engine.module)
    fresh = make_engine(args)
    tag = None if args["save_latest"] else ckptfs.deepspeed.latest_tag(run)
    path, client_state = fresh.load_checkpoint(run, tag=tag)
    return {"after_save": after, "digest": saved_digest, "loaded_path": path,
            "loaded_digest": params_digest(fresh.module),
            "loaded_tag": (client_state or {}).get("tag"),
            "loaded_step": fresh.global_steps}


def scenario_failing_rank(rank, world, args):
    """Saves tag "good", then tag "bad" where rank `failing_rank`'s
    optimizer-state write raises ENOSPC; every rank reports what its second
    save_checkpoint raised."""
    run = args["run"]
    engine = make_engine(args)
    train_steps(engine, rank, 2)
    engine.save_checkpoint(run, tag="good", save_latest=False)
    if rank == args["failing_rank"]:
        real_save = torch.save

        def failing_save(obj, path, *a, **k):  # what the engine's save calls
            if "optim_states" in os.path.basename(str(path)):
                with open(path, "wb") as f:
                    f.write(b"x" * 1000)
                raise OSError(28, "simulated: no space left", str(path))
            return real_save(obj, path, *a, **k)

        torch.save = failing_save
    else:
        # The other ranks make the tag's directory again only once the
        # failing rank removed it: the order that left a plain directory
        # of their files behind.
        real_makedirs = engine.checkpoint_engine.makedirs
        bad = os.path.abspath(os.path.join(run, "bad"))

        def late_makedirs(path, exist_ok=False):
            if os.path.abspath(path) == bad:
                deadline = time.monotonic() + 30
                while os.path.isdir(bad) and time.monotonic() < deadline:
                    time.sleep(0.05)
            return real_makedirs(path, exist_ok=exist_ok)

        engine.checkpoint_engine.makedirs = late_makedirs
    try:
        engine.save_checkpoint(run, tag="bad", save_latest=False)
    except Exception as e:
        return {"raised": True, "error": "%s: %s" % (type(e).__name__, e)}
    return {"raised": False}


def main():
    rank_main({"save": scenario_save, "failing_rank": scenario_failing_rank},
              init=lambda rank, world: deepspeed.init_distributed(dist_backend="gloo"))


if __name__ == "__main__":
    main()
