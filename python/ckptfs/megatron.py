"""Megatron-Core distributed checkpointing (and NVIDIA Resiliency
Extension's async checkpointing) on ckptfs: the checkpoint directory is
declared before the save and committed by a finalize function of the
async request, on every rank.

    from megatron.core import dist_checkpointing
    from megatron.core.dist_checkpointing.strategies.async_utils import AsyncCallsQueue
    import ckptfs.megatron

    queue = AsyncCallsQueue()
    ckpt_dir = f"/checkpoints/run1/iter_{iteration:07d}"
    request = ckptfs.megatron.save(sharded_state_dict, ckpt_dir, async_sharded_save=True)
    request.add_finalize_fn(write_tracker_file)       # what must follow the commit
    queue.schedule_async_request(request)
    ...
    queue.maybe_finalize_async_calls(blocking=False)  # commits finished saves

save() is dist_checkpointing.save between the two calls this module adds,
which may also be used by themselves around a caller's own save:

 - prepare(ckpt_dir), on every rank before the save: dist_checkpointing.save
   needs the directory to exist (rank 0 lists it), and every file must be
   created inside a declared checkpoint. Rank 0 removes what stands under
   that name (a committed checkpoint saved again, with a warning, or what a
   failed attempt left) and declares it a checkpoint of world-size ranks;
   after a barrier every rank declares it too (a check).
 - commit_fn(ckpt_dir): the finalize function that commits this rank. An
   AsyncRequest calls its finalize functions in order on every rank once
   the background writes of all ranks have ended (AsyncCallsQueue's
   maybe_finalize_async_calls, or execute_sync); append it after the ones
   dist_checkpointing.save put there (writing .metadata and metadata.json)
   and before anything that records the checkpoint as done, such as
   Megatron-LM's latest_checkpointed_iteration.txt. It returns once all
   ranks arrived: the checkpoint is durable, immutable, and the run
   directory's `latest` names it. A synchronous save (async_sharded_save
   False) is committed by save() before it returns.

If a background write fails, Megatron's own finalize function raises
(CheckpointException, on every rank) before the commit: the checkpoint
stays pending, hidden from listings, so no resume picks it; abort(ckpt_dir)
removes it at once (prepare() of the same name also does). A rank that dies
leaves the others waiting in the commit until its timeout
(commit_timeout_s), which aborts the checkpoint.

Resume from ckptfs.latest(run_dir) (the newest committed checkpoint); keep=K
keeps only the K newest committed checkpoints of the run directory, applied
by each commit. The same commit_fn works with NVIDIA Resiliency Extension's
AsyncRequest and AsyncCallsQueue (nvidia_resiliency_ext.checkpointing.
async_ckpt.core), whose finalize functions run the same way.

Off a ckptfs mount prepare() warns and only creates the directory, and
commit_fn's function does nothing, so the same script runs anywhere
(require_ckptfs=True makes that an error). Functions are called from each
rank's training thread; commit_fn's function runs where the queue
finalizes.
"""

import errno
import logging
import os
import warnings

import ckptfs

__all__ = ["save", "prepare", "commit_fn", "abort"]

_log = logging.getLogger(__name__)


def _rank_and_world():
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def prepare(ckpt_dir, commit_timeout_s=None, keep=None, require_ckptfs=False):
    """Declares `ckpt_dir` a checkpoint of every rank of the default process
    group, creating it; call on every rank before writing into it. Raises
    on every rank if rank 0 could not (a plain directory of that name, a
    refused declaration). Off a ckptfs mount it only creates the directory,
    after a warning (require_ckptfs=True: OSError(ENOTSUP))."""
    import torch.distributed as dist
    ckpt_dir = os.path.abspath(os.fspath(ckpt_dir))
    rank, world = _rank_and_world()
    if keep is not None and int(keep) < 1:
        raise ValueError("ckptfs.megatron: keep=%r; keep at least 1 checkpoint" % (keep,))
    if not ckptfs.on_ckptfs(ckpt_dir):
        if require_ckptfs:
            raise OSError(errno.ENOTSUP, "ckptfs.megatron: %s is not on a ckptfs mount "
                          "(require_ckptfs=True)" % ckpt_dir, ckpt_dir)
        warnings.warn("ckptfs.megatron: %s is not on a ckptfs mount; saving without a commit "
                      "(pass require_ckptfs=True to make this an error)" % ckpt_dir,
                      RuntimeWarning, stacklevel=2)
        os.makedirs(ckpt_dir, exist_ok=True)
        return
    error = None
    if rank == 0:
        try:
            _clear(ckpt_dir)
            ckptfs.declare(ckpt_dir, world, timeout_s=commit_timeout_s)
            if keep is not None:
                ckptfs.keep(os.path.dirname(ckpt_dir), int(keep))
        except Exception as e:  # raised on every rank below
            error = "%s: %s" % (type(e).__name__, e)
    if world > 1:
        outcome = [error]
        dist.broadcast_object_list(outcome, src=0)
        error = outcome[0]
    if error is not None:
        raise RuntimeError("ckptfs.megatron: cannot prepare checkpoint %s: %s"
                           % (ckpt_dir, error))
    if rank != 0:
        ckptfs.declare(ckpt_dir, world, timeout_s=commit_timeout_s)


def commit_fn(ckpt_dir):
    """A finalize function (no arguments) that commits this rank's part of
    `ckpt_dir` and returns once every rank has; raises OSError if the
    checkpoint aborted, with the reason. The rank is this process's rank in
    the default process group when commit_fn is called. Off a ckptfs
    mount the function does nothing (see prepare)."""
    ckpt_dir = os.path.abspath(os.fspath(ckpt_dir))
    rank, _ = _rank_and_world()
    on_mount = ckptfs.on_ckptfs(ckpt_dir)

    def commit_checkpoint():
        if on_mount:
            ckptfs.commit(ckpt_dir, rank)

    return commit_checkpoint


def abort(ckpt_dir):
    """Removes `ckpt_dir` if it is a pending checkpoint (a save whose
    finalize raised); returns whether it did. Any rank may call it."""
    ckpt_dir = os.path.abspath(os.fspath(ckpt_dir))
    try:
        if ckptfs.state(ckpt_dir) != "pending":
            return False
        ckptfs.remove(ckpt_dir)
    except FileNotFoundError:
        return False
    _log.warning("ckptfs.megatron: removed the pending checkpoint %s", ckpt_dir)
    return True


def save(sharded_state_dict, ckpt_dir, *args, commit_timeout_s=None, keep=None,
         require_ckptfs=False, **kwargs):
    """megatron.core.dist_checkpointing.save(sharded_state_dict, ckpt_dir,
    *args, **kwargs) into a declared checkpoint. With
    async_sharded_save=True returns its AsyncRequest with commit_fn(ckpt_dir)
    appended (schedule it, after adding what must follow the commit);
    otherwise commits and returns None."""
    from megatron.core import dist_checkpointing
    prepare(ckpt_dir, commit_timeout_s=commit_timeout_s, keep=keep,
            require_ckptfs=require_ckptfs)
    request = dist_checkpointing.save(sharded_state_dict, ckpt_dir, *args, **kwargs)
    if request is None:
        commit_fn(ckpt_dir)()
        return None
    request.add_finalize_fn(commit_fn(ckpt_dir))
    return request


def _clear(ckpt_dir):
    if not os.path.lexists(ckpt_dir):
        return
    state = ckptfs.state(ckpt_dir) if os.path.isdir(ckpt_dir) else None
    if state is None:
        if os.path.isdir(ckpt_dir) and not os.listdir(ckpt_dir):
            return  # made empty by the caller (Megatron-LM's ensure_directory_exists)
        raise FileExistsError(errno.EEXIST, "%s exists and is not a ckptfs checkpoint; move it "
                              "away or save under another name" % ckpt_dir, ckpt_dir)
    if state == "committed":
        _log.warning("ckptfs.megatron: replacing committed checkpoint %s", ckpt_dir)
    else:
        _log.warning("ckptfs.megatron: removing %s checkpoint %s left by an earlier attempt",
                     state, ckpt_dir)
    ckptfs.remove(ckpt_dir)
