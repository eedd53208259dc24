"""One rank of a torch.distributed job (gloo, CPU) that checkpoints with
torchtitan's CheckpointManager as built by ckptfs.torchtitan
(CkptfsCheckpointManager), over torchtitan's own optimizer and LR scheduler
containers; started by ranks.py.

Usage: torchtitan_main.py train JSON_ARGS. The model is replicated on every
rank (DCP writes each replicated tensor once, each rank commits).
"""

import hashlib
import os
import warnings

from framework_support import rank_main

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torchtitan.components.optimizer import OptimizersContainer  # noqa: E402
from torchtitan.components.optimizer.lr_scheduler import LRSchedulersContainer  # noqa: E402
from torchtitan.components.optimizer.optimizer import ParamGroupConfig  # noqa: E402

import ckptfs  # noqa: E402
from ckptfs.torchtitan import CkptfsCheckpointManager  # noqa: E402


class TrainState:
    """The training step, saved as torchtitan saves its train_state."""

    def __init__(self):
        self.step = 0

    def state_dict(self):
        return {"step": torch.tensor(self.step)}

    def load_state_dict(self, state):
        self.step = int(state["step"])


def params_digest(module):
    h = hashlib.sha256()
    for name, p in sorted(module.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def scenario_train(rank, world, args):
    """Loads the newest checkpoint of the run (if any), then trains to
    `steps`, saving every `interval` steps and at the last (a full state,
    not model-only). Reports each save's state right after save() returned
    and after the manager waited for it."""
    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.Tanh(),
                                torch.nn.Linear(512, 1))
    optimizers = OptimizersContainer.Config(
        param_groups=[ParamGroupConfig(pattern=".*", optimizer_name="AdamW",
                                       optimizer_kwargs={"lr": 1e-3})],
        implementation="for-loop").build(model_parts=[model])
    schedulers = LRSchedulersContainer.Config(warmup_steps=2).build(
        optimizers=optimizers, training_steps=args["steps"])
    train_state = TrainState()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # As torchtitan's Trainer builds its checkpointer: config.checkpoint.build(...).
        manager = CkptfsCheckpointManager.Config(
            enable=True, folder="checkpoint", interval=args["interval"],
            async_mode=args["async_mode"], keep_latest_k=args["keep_latest_k"],
            last_save_model_only=False).build(
            dataloader=None, model_parts=[model], optimizers=optimizers,
            lr_schedulers=schedulers, states={"train_state": train_state}, sd_adapter=None,
            base_folder=args["run"])
    assert type(manager) is CkptfsCheckpointManager
    folder = manager.folder
    loaded = manager.load()
    start = {"loaded": loaded, "step": train_state.step, "digest": params_digest(model)}
    g = torch.Generator().manual_seed(100 + rank)
    right_after = {}
    while train_state.step < args["steps"]:
        train_state.step += 1
        x = torch.randn(8, 256, generator=g)
        loss = (model(x) - x[:, :1]).pow(2).mean()
        loss.backward()
        for p in model.parameters():  # the gradient all-reduce DDP would do
            dist.all_reduce(p.grad)
            p.grad /= world
        optimizers.step()
        schedulers.step()
        optimizers.zero_grad()
        step = train_state.step
        if manager.save(step, last_step=step == args["steps"]):
            path = os.path.join(folder, "step-%d" % step)
            right_after[step] = ckptfs.state(path) if os.path.isdir(path) else "absent"
    manager.maybe_wait_for_saving()
    after_wait = {int(c["name"].split("-")[1]): c["state"]
                  for c in ckptfs.checkpoints(folder, all=True)}
    digest = params_digest(model)
    manager.close()
    return {"start": start, "right_after": right_after, "after_wait": after_wait,
            "digest": digest, "folder": folder}


def main():
    rank_main({"train": scenario_train},
              init=lambda rank, world: dist.init_process_group("gloo"))


if __name__ == "__main__":
    main()
