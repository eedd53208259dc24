"""One rank of a PyTorch Lightning DDP job (gloo, CPU) that checkpoints
through ckptfs.lightning.CkptfsCheckpointIO; started by ranks.py (Lightning
sees RANK, LOCAL_RANK, WORLD_SIZE and takes the processes as launched).

Usage: lightning_main.py fit JSON_ARGS. The model is small but not tiny
(about 0.5 MiB of weights, three times that with Adam's state), so that
the space retention frees shows against the cluster's overhead.
"""

import hashlib
import os
import time
import warnings

from framework_support import rank_main

import torch  # noqa: E402  (after the harness, before Lightning)
import lightning.pytorch as pl  # noqa: E402
from lightning.pytorch.callbacks import ModelCheckpoint  # noqa: E402
from lightning.pytorch.plugins.io import AsyncCheckpointIO  # noqa: E402
from lightning.pytorch.strategies import DDPStrategy  # noqa: E402

from ckptfs.lightning import CkptfsCheckpointIO  # noqa: E402


def params_digest(module):
    h = hashlib.sha256()
    for name, p in sorted(module.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


class TinyRegressor(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.Tanh(),
                                       torch.nn.Linear(512, 1))
        self.start = None

    def training_step(self, batch, _):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True, sync_dist=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)

    def on_train_start(self):
        # After a resume: what the checkpoint restored.
        self.start = {"global_step": self.trainer.global_step,
                      "epoch": self.trainer.current_epoch, "digest": params_digest(self)}


class WatchedCheckpointIO(CkptfsCheckpointIO):
    """Counts the removals asked for before their checkpoint's save ended
    (AsyncCheckpointIO had it queued or running). A save_delay_s holds each
    save back that long, so that the next step's save and removal come while
    it is still queued or running, however fast the machine is."""

    early_removals = 0

    def __init__(self, save_delay_s=0.0):
        super().__init__()
        self.save_delay_s = save_delay_s

    def save_checkpoint(self, checkpoint, path, storage_options=None):
        time.sleep(self.save_delay_s)
        super().save_checkpoint(checkpoint, path, storage_options)

    def remove_checkpoint(self, path):
        with self._lock:
            if os.path.abspath(path) in self._saving or not os.path.lexists(path):
                self.early_removals += 1
        super().remove_checkpoint(path)


def data(rank):
    g = torch.Generator().manual_seed(11)
    x = torch.randn(64, 256, generator=g)
    y = x[:, :1] * 0.5
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)


def scenario_fit(rank, world, args):
    """fit() for max_epochs with ModelCheckpoint(dirpath=run) keeping the
    top_k newest saves (monitor="step") plus last.ckpt; resumes from args["ckpt_path"]."""
    torch.manual_seed(3)
    io = WatchedCheckpointIO(save_delay_s=args.get("save_delay_s", 0.0))
    plugin = AsyncCheckpointIO(io) if args.get("async") else io
    checkpoint = ModelCheckpoint(
        dirpath=args["run"], filename="{epoch}-{step}", monitor="step", mode="max",
        save_top_k=args["top_k"], save_last=args.get("save_last", True),
        every_n_train_steps=args.get("every_n_train_steps"))
    trainer = pl.Trainer(
        accelerator="cpu", devices=world, num_nodes=1,
        strategy=DDPStrategy(process_group_backend="gloo"), max_epochs=args["max_epochs"],
        plugins=[plugin], callbacks=[checkpoint], logger=False, enable_progress_bar=False,
        enable_model_summary=False, num_sanity_val_steps=0)
    model = TinyRegressor()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # few workers, small batches, non-empty dirpath
        trainer.fit(model, train_dataloaders=data(rank), ckpt_path=args.get("ckpt_path"))
    return {
        "start": model.start,
        "global_step": trainer.global_step,
        "digest": params_digest(model),
        "best_k_models": sorted(os.path.basename(p) for p in checkpoint.best_k_models),
        "last_model_path": checkpoint.last_model_path,
        "deferred_left": sorted(io._deferred),
        "early_removals": io.early_removals,
    }


def main():
    rank_main({"fit": scenario_fit})


if __name__ == "__main__":
    main()
