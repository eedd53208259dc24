"""Hugging Face transformers' Trainer on ckptfs: a TrainerCallback that makes
each checkpoint-N directory a checkpoint committed by every process.

    from transformers import Trainer
    from ckptfs.huggingface import CkptfsCallback

    trainer = Trainer(model=model, args=args, train_dataset=ds,
                      callbacks=[CkptfsCallback()])   # args.output_dir on the mount
    trainer.train(resume_from_checkpoint=True)         # the newest committed one

Trainer._save_checkpoint writes output_dir/checkpoint-N directly (no
temporary directory): the model, optimizer, scheduler and trainer state from
the saving process, and rng_state_R.pth from every process R. So the
checkpoint has args.world_size ranks, rank R = args.process_index:

 1. Declare, before anything is written: on_step_end (and on_epoch_end)
    when the trainer is about to save, process 0 clears what an earlier
    attempt left under that name, then every process declares. A process
    that dies mid-save leaves a pending directory, which listings hide, so
    resume_from_checkpoint=True (transformers' get_last_checkpoint, a
    listing) never picks a torn checkpoint. With save_strategy="best" the
    save is decided after evaluation; on_evaluate then declares in case,
    and an unused declaration is removed at the next step.
 2. Commit in on_save, on every process, after the save: it returns when all
    have arrived; the checkpoint is then durable, immutable, and the run
    directory's `latest` names it. A failed commit (a process died or a write
    failed; the error says why) raises, which stops training as a failed
    save does; the previous checkpoint stays the newest committed one.
 3. Retention: the Trainer rotates (save_total_limit) before on_save, when
    the new checkpoint is still pending and hidden, so it would keep one
    checkpoint too many; after the commit, process 0 applies
    save_total_limit itself, oldest first by commit order, keeping the
    newest and state.best_model_checkpoint, as the Trainer does, and
    removes with ckptfs.remove so the space comes back.

Saving again under the name of a committed checkpoint (a run resumed from an
older checkpoint than its newest) replaces it, with a warning. Off a ckptfs
mount the callback warns once and does nothing (require_ckptfs=True makes
that an error). Hyperparameter search (one output directory per trial) and
save_on_each_node=True (every node writing the same files into one shared
checkpoint) are refused with a ValueError.

The Trainer calls a callback from its training thread only.
"""

import errno
import logging
import os
import re
import warnings

from transformers import TrainerCallback

import ckptfs

__all__ = ["CkptfsCallback"]

_log = logging.getLogger(__name__)

_CHECKPOINT_NAME = re.compile(r"^checkpoint-\d+$")


class CkptfsCallback(TrainerCallback):
    """Commits every checkpoint-N the Trainer saves; see the module docstring.

    Arguments:
      commit_timeout_s: abort a checkpoint unless every process commits within
        this many seconds of the first (default: the output directory's
        user.ckptfs.commit_timeout_s, else the metadata service's).
      require_ckptfs: raise instead of doing nothing off a ckptfs mount.
    """

    def __init__(self, commit_timeout_s=None, require_ckptfs=False):
        self.commit_timeout_s = commit_timeout_s
        self.require_ckptfs = require_ckptfs
        self._active = None           # decided at on_train_begin
        self._training = False
        self._declared = None         # the checkpoint declared ahead of its save
        self._speculative = False     # declared by on_evaluate (save_strategy="best")

    # -- Trainer events ---------------------------------------------------

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_hyper_param_search:
            raise ValueError("CkptfsCallback does not support hyperparameter search: each "
                             "trial saves into its own run directory under output_dir")
        if args.save_on_each_node and args.world_size > 1:
            raise ValueError("CkptfsCallback: save_on_each_node=True makes every node write "
                             "the same files into one checkpoint, and ckptfs is one file "
                             "system shared by all nodes; set save_on_each_node=False")
        self._active = self._check_mount(args.output_dir)
        self._training = True

    def on_step_begin(self, args, state, control, **kwargs):
        self._drop_unused_declaration(args, state)

    def on_step_end(self, args, state, control, **kwargs):
        if self._active and control.should_save:
            self._declare(args, state)

    def on_epoch_end(self, args, state, control, **kwargs):
        if self._active and control.should_save:
            self._declare(args, state)

    def on_evaluate(self, args, state, control, **kwargs):
        if (self._active and self._training and _save_strategy(args) == "best"
                and not control.should_save):
            self._declare(args, state, speculative=True)

    def on_save(self, args, state, control, **kwargs):
        if not self._active:
            return
        path = self._path(args, state)
        if self._declared != path or ckptfs.state(path) is None:
            # Saved at a moment no event announced: declaring now adopts the
            # files written, so the commit still makes them one checkpoint.
            _log.warning("CkptfsCallback: %s was written before it was declared; declaring "
                         "and committing it now", path)
            ckptfs.declare(path, args.world_size, timeout_s=self.commit_timeout_s)
        self._declared, self._speculative = None, False
        ckptfs.commit(path, args.process_index)
        if args.process_index == 0:
            self._rotate(args, state)

    def on_train_end(self, args, state, control, **kwargs):
        self._drop_unused_declaration(args, state)
        self._training = False

    # -- helpers ----------------------------------------------------------

    def _check_mount(self, output_dir):
        if ckptfs.on_ckptfs(output_dir):
            return True
        if self.require_ckptfs:
            raise OSError(errno.ENOTSUP, "CkptfsCallback: output_dir %s is not on a ckptfs "
                          "mount (require_ckptfs=True)" % output_dir, output_dir)
        warnings.warn("CkptfsCallback: output_dir %s is not on a ckptfs mount; checkpoints "
                      "are saved as the Trainer saves them, without a commit (pass "
                      "require_ckptfs=True to make this an error)" % output_dir,
                      RuntimeWarning, stacklevel=2)
        return False

    @staticmethod
    def _path(args, state):
        return os.path.join(os.path.abspath(args.output_dir),
                            "checkpoint-%d" % state.global_step)

    def _declare(self, args, state, speculative=False):
        path = self._path(args, state)
        if self._declared == path:
            return
        if speculative and os.path.isdir(path) and ckptfs.state(path) == "committed":
            return  # not replaced for a save that may not happen
        if args.process_index == 0:
            self._clear(path)
        _barrier(args)  # no process declares before the leftovers are gone
        ckptfs.declare(path, args.world_size, timeout_s=self.commit_timeout_s)
        self._declared, self._speculative = path, speculative

    @staticmethod
    def _clear(path):
        """Removes what stands under the name of the checkpoint about to be
        saved: a committed checkpoint of an abandoned timeline, or what a
        failed attempt left. A plain directory (saved without ckptfs) is an
        error: ckptfs cannot declare over files it did not see written."""
        if not os.path.lexists(path):
            return
        state = ckptfs.state(path)
        if state is None:
            raise FileExistsError(
                errno.EEXIST, "CkptfsCallback: %s exists and is not a ckptfs checkpoint "
                "(saved without CkptfsCallback); move it away or use another output_dir"
                % path, path)
        if state == "committed":
            _log.warning("CkptfsCallback: replacing committed checkpoint %s (training "
                         "resumed from an older checkpoint)", path)
        else:
            _log.warning("CkptfsCallback: removing %s checkpoint %s left by an earlier "
                         "attempt", state, path)
        ckptfs.remove(path)

    def _drop_unused_declaration(self, args, state):
        """Removes a declaration on_evaluate made for a save that did not
        happen (save_strategy="best" and no new best)."""
        if not self._speculative or self._declared is None:
            return
        path, self._declared, self._speculative = self._declared, None, False
        if args.process_index != 0:
            return
        try:
            info = ckptfs.info(path)
            if info and info["state"] == "pending" and info["arrived"] == 0:
                ckptfs.remove(path)
        except FileNotFoundError:
            pass

    @staticmethod
    def _rotate(args, state):
        """save_total_limit, as the Trainer applies it, over committed
        checkpoints in commit order: the newest and the best are kept."""
        limit = args.save_total_limit
        if not limit or limit <= 0:
            return
        run_dir = os.path.abspath(args.output_dir)
        ours = [c for c in ckptfs.checkpoints(run_dir) if _CHECKPOINT_NAME.match(c["name"])]
        ours.sort(key=lambda c: (c.get("ended_ms", 0), c["name"]))
        if len(ours) <= limit:
            return
        protected = {ours[-1]["path"]}
        if state.best_model_checkpoint:
            protected.add(os.path.abspath(state.best_model_checkpoint))
        excess = len(ours) - max(limit, len(protected))
        for c in ours:
            if excess <= 0:
                break
            if c["path"] in protected:
                continue
            _log.info("CkptfsCallback: removing %s (save_total_limit=%d)", c["path"], limit)
            try:
                ckptfs.remove(c["path"])
            except FileNotFoundError:
                pass  # removed meanwhile
            excess -= 1


def _save_strategy(args):
    strategy = args.save_strategy
    return getattr(strategy, "value", strategy)


def _barrier(args):
    if args.world_size <= 1:
        return
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
