"""torchtitan on ckptfs: a CheckpointManager whose every save of step-N is a
committed checkpoint, and whose keep_latest_k retention the commit applies.

torchtitan's Trainer builds its checkpointer with
config.checkpoint.build(...), which constructs the class that declared the
config's type; so a job selects this manager in its Python config by giving
the checkpoint field this class's Config (same fields, plus
commit_timeout_s), and nothing else changes:

    from ckptfs.torchtitan import CkptfsCheckpointManager

    config = Trainer.Config(
        ...,
        checkpoint=CkptfsCheckpointManager.Config(
            enable=True, folder="checkpoint", interval=500, async_mode="async",
            keep_latest_k=3),
        dump_folder="/checkpoints/run1")

torchtitan saves each step with dcp.save or dcp.async_save given only a
checkpoint_id, so DCP's stock FileSystemWriter writes it. The one hook is
CheckpointManager.dcp_save: here it hands DCP a ckptfs.dcp.CkptfsWriter for
the same path, which declares the checkpoint during DCP's planning and
commits it when DCP finishes (every rank of the process group is a rank of
the checkpoint): a synchronous save returns, and an async save's future
completes (maybe_wait_for_saving), only once step-N is committed; an abort
raises there. The final Hugging Face export (last_save_in_hf) is declared
before its writer runs and committed after the consolidation.

Resuming needs nothing: torchtitan's load lists the folder's step-N
directories holding .metadata, and a listing shows committed checkpoints
only, so an interrupted save is never picked.

Retention: torchtitan's purge lists step-N directories (the in-flight one is
hidden while pending) and removes all but the newest keep_latest_k with
shutil.rmtree(ignore_errors=True) on a background thread. Here the commit
does it instead (ckptfs.keep on the folder, applied in the commit's
transaction: the older committed checkpoints go and their space is
reclaimed), and the purge thread is left idle.

Off a ckptfs mount the writer warns and saves as the stock one does, and
torchtitan's own purge runs.
"""

import os
from dataclasses import dataclass

import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict_saver import AsyncCheckpointerType
from torchtitan.components.checkpoint import AsyncMode, CheckpointManager
from torchtitan.tools.utils import GarbageCollection

import ckptfs
from ckptfs.dcp import CkptfsWriter

__all__ = ["CkptfsCheckpointManager"]


class CkptfsCheckpointManager(CheckpointManager):
    """CheckpointManager committing every step-N; see the module docstring.

    Config adds commit_timeout_s: abort a save unless every rank reaches the
    commit within that many seconds of the first (0: the folder's
    user.ckptfs.commit_timeout_s, else the metadata service's).
    """

    @dataclass(kw_only=True, slots=True)
    class Config(CheckpointManager.Config):
        commit_timeout_s: int = 0
        """Commit timeout of each checkpoint in seconds; 0 for the default."""

    def __init__(self, config, **kwargs):
        super().__init__(config, **kwargs)
        self.commit_timeout_s = config.commit_timeout_s or None

    def _on_ckptfs(self):
        return ckptfs.on_ckptfs(self.folder)

    def _should_purge(self):
        # On ckptfs each commit applies keep_latest_k (ckptfs.keep).
        return not self._on_ckptfs() and super()._should_purge()

    def dcp_save(self, state_dict, checkpoint_id, async_mode, enable_garbage_collection=False,
                 to_hf=False):
        if not self._on_ckptfs():
            return super().dcp_save(state_dict, checkpoint_id, async_mode,
                                    enable_garbage_collection, to_hf)
        if to_hf:
            return self._save_hf_committed(state_dict, checkpoint_id, async_mode,
                                           enable_garbage_collection)
        keep = self.keep_latest_k if self.keep_latest_k > 0 else None
        writer = CkptfsWriter(checkpoint_id, commit_timeout_s=self.commit_timeout_s,
                              keep=keep)
        if async_mode == AsyncMode.ASYNC:
            result = dcp.async_save(state_dict, storage_writer=writer,
                                    checkpoint_id=checkpoint_id, process_group=self.pg)
        elif async_mode == AsyncMode.ASYNC_WITH_PINNED_MEM:
            result = dcp.async_save(state_dict, storage_writer=writer,
                                    checkpoint_id=checkpoint_id, process_group=self.pg,
                                    async_checkpointer_type=AsyncCheckpointerType.PROCESS,
                                    async_stager=self.stager)
        else:
            result = dcp.save(state_dict, storage_writer=writer, checkpoint_id=checkpoint_id)
        if enable_garbage_collection:
            GarbageCollection.collect("GC collection invoked by checkpointer.")
        return result

    def _save_hf_committed(self, state_dict, checkpoint_id, async_mode,
                           enable_garbage_collection):
        """The Hugging Face export, written by torchtitan's own writer and
        consolidation, inside a checkpoint declared before and committed
        after (torchtitan saves it synchronously, at the last step)."""
        if async_mode != AsyncMode.DISABLED:
            raise ValueError("CkptfsCheckpointManager: a Hugging Face format save is "
                             "synchronous in torchtitan; got async_mode=%s" % async_mode)
        world = dist.get_world_size() if dist.is_initialized() else 1
        rank = dist.get_rank() if dist.is_initialized() else 0
        if rank == 0:
            if os.path.isdir(checkpoint_id) and ckptfs.state(checkpoint_id) is not None:
                ckptfs.remove(checkpoint_id)  # an earlier attempt's leftovers
            ckptfs.declare(checkpoint_id, world, timeout_s=self.commit_timeout_s)
            if self.keep_latest_k > 0:
                ckptfs.keep(os.path.dirname(os.path.abspath(checkpoint_id)),
                            self.keep_latest_k)
        if world > 1:
            dist.barrier()
        result = super().dcp_save(state_dict, checkpoint_id, async_mode,
                                  enable_garbage_collection, to_hf=True)
        ckptfs.commit(checkpoint_id, rank)
        return result

