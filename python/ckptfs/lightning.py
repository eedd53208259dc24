"""PyTorch Lightning on ckptfs: a CheckpointIO plugin whose every saved
checkpoint is a committed ckptfs checkpoint.

    from lightning.pytorch import Trainer
    from lightning.pytorch.callbacks import ModelCheckpoint
    from ckptfs.lightning import CkptfsCheckpointIO

    trainer = Trainer(plugins=[CkptfsCheckpointIO()],
                      callbacks=[ModelCheckpoint(dirpath="/checkpoints/run1", save_top_k=2,
                                                 monitor="val_loss", save_last=True)])
    trainer.fit(model, ckpt_path="last")   # or a checkpoint's path, or the run directory

Lightning writes one file per checkpoint, on global rank 0 only; a ckptfs
checkpoint is a directory. So each path Lightning saves to (e.g.
run1/epoch=3-step=400.ckpt) becomes a checkpoint directory of one rank
holding the file CHECKPOINT_FILE, as Lightning's own DeepSpeed strategy
saves a directory per checkpoint. The save declares the directory, writes
the file (torch.save, no fsync) and commits: when Trainer.save_checkpoint
returns, the checkpoint is durable, immutable, and the run directory's
`latest` names it. A save that raises removes its pending directory and
re-raises; a process that dies mid-save leaves a pending directory, which
listings hide, so ModelCheckpoint's ckpt_path="last" (a listing of
last*.ckpt) never finds a torn one. Saving to the name of a committed
checkpoint (last.ckpt, saved again at every epoch) replaces it: the old one
is removed, then the new one saved; meanwhile `latest` names the previous
committed checkpoint (save_last="link" avoids that window: last.ckpt is then
a symlink to the newest top-k checkpoint).

Loading takes a checkpoint directory written here, a plain checkpoint
file (one saved before ckptfs), or a run directory (its `latest`); a pending
or aborted checkpoint raises ckptfs.dcp.NotCommittedError. Removal (what
save_top_k retention calls) removes the whole checkpoint with ckptfs.remove,
so its space comes back. Under Lightning's AsyncCheckpointIO, saves run on
its worker thread while ModelCheckpoint asks for removals right after
queueing the save that replaces them: a removal of a checkpoint whose save
is still queued or running is carried out when that save ends.

Off a ckptfs mount it warns once and saves plain files as TorchCheckpointIO
does (require_ckptfs=True makes that an error). One instance may be used
from the trainer's thread and AsyncCheckpointIO's worker thread at once.
"""

import errno
import logging
import os
import threading
import warnings

import torch
from lightning.fabric.plugins.io.checkpoint_io import CheckpointIO
from lightning.fabric.utilities.cloud_io import _load as _pl_load

import ckptfs
from ckptfs.dcp import NotCommittedError, resolve_committed

__all__ = ["CkptfsCheckpointIO", "CHECKPOINT_FILE", "checkpoint_file", "NotCommittedError"]

CHECKPOINT_FILE = "checkpoint.ckpt"

_log = logging.getLogger(__name__)


def checkpoint_file(path):
    """The file to torch.load (or LightningModule.load_from_checkpoint) for
    Lightning checkpoint `path`: the file inside a checkpoint directory
    saved by CkptfsCheckpointIO, `path` itself if it is a file, or the file
    of the newest committed checkpoint if `path` is a run directory. Raises
    NotCommittedError for a pending or aborted checkpoint and
    FileNotFoundError if there is nothing to load."""
    path = os.fspath(path)
    if os.path.isfile(path):
        return path
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, "no Lightning checkpoint at %s" % path, path)
    directory = resolve_committed(path) if ckptfs.on_ckptfs(path) else path
    inside = os.path.join(directory, CHECKPOINT_FILE)
    if not os.path.isfile(inside):
        raise FileNotFoundError(
            errno.ENOENT, "%s holds no %s: not a checkpoint saved by CkptfsCheckpointIO"
            % (directory, CHECKPOINT_FILE), inside)
    return inside


class CkptfsCheckpointIO(CheckpointIO):
    """CheckpointIO that commits each checkpoint; see the module docstring.

    Arguments:
      commit_timeout_s: how long the commit may wait (default: the run
        directory's user.ckptfs.commit_timeout_s, else the service's). The
        checkpoint has one rank, so this only bounds a stuck commit.
      require_ckptfs: raise instead of saving plain files off a ckptfs mount.
    """

    def __init__(self, commit_timeout_s=None, require_ckptfs=False):
        super().__init__()
        self.commit_timeout_s = commit_timeout_s
        self.require_ckptfs = require_ckptfs
        self._lock = threading.Lock()
        self._saving = set()     # paths whose save is running now
        self._deferred = set()   # removals to carry out when their save ends
        self._warned = False

    def save_checkpoint(self, checkpoint, path, storage_options=None):
        if storage_options is not None:
            raise TypeError("CkptfsCheckpointIO.save_checkpoint does not take storage_options "
                            "(got %r)" % (storage_options,))
        path = os.path.abspath(os.fspath(path))
        if not self._on_ckptfs(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            torch.save(checkpoint, path)
            return
        with self._lock:
            self._saving.add(path)
        try:
            self._save_committed(checkpoint, path)
        finally:
            with self._lock:
                self._saving.discard(path)
                remove_now = path in self._deferred
                self._deferred.discard(path)
            if remove_now:
                _log.info("CkptfsCheckpointIO: removing %s now that its save ended: its "
                          "removal was asked for while the save was queued", path)
                self._remove(path)

    def load_checkpoint(self, path, map_location=lambda storage, loc: storage, weights_only=None):
        return _pl_load(checkpoint_file(path), map_location=map_location,
                        weights_only=weights_only)

    def remove_checkpoint(self, path):
        path = os.path.abspath(os.fspath(path))
        with self._lock:
            queued = path in self._saving or not os.path.lexists(path)
            if queued and self._on_ckptfs(path):
                # Still being saved, or (AsyncCheckpointIO) queued: its save
                # removes it when it ends.
                self._deferred.add(path)
                return
        self._remove(path)

    def teardown(self):
        with self._lock:
            self._deferred.clear()

    def _save_committed(self, checkpoint, path):
        self._clear(path)
        ckptfs.declare(path, 1, timeout_s=self.commit_timeout_s)
        try:
            torch.save(checkpoint, os.path.join(path, CHECKPOINT_FILE))
        except BaseException:
            self._abort(path)
            raise
        ckptfs.commit(path, 0)

    def _clear(self, path):
        """Makes room for a new checkpoint at `path`: a committed one (an
        overwrite, as of last.ckpt) and what a failed attempt left are
        removed; anything else there is an error."""
        if not os.path.lexists(path):
            return
        state = ckptfs.state(path) if os.path.isdir(path) and not os.path.islink(path) else None
        if state is None:
            raise FileExistsError(
                errno.EEXIST, "CkptfsCheckpointIO: %s exists and is not a ckptfs checkpoint "
                "(a file or directory saved some other way); move it away or give "
                "ModelCheckpoint another dirpath" % path, path)
        if state == "committed":
            _log.info("CkptfsCheckpointIO: replacing committed checkpoint %s", path)
        else:
            _log.warning("CkptfsCheckpointIO: removing %s checkpoint %s left by an earlier "
                         "attempt before saving again", state, path)
        ckptfs.remove(path)

    def _abort(self, path):
        try:
            ckptfs.remove(path)
        except OSError as e:
            _log.warning("CkptfsCheckpointIO: could not remove the failed checkpoint %s "
                         "(%s); it stays pending and hidden from listings", path, e)

    def _remove(self, path):
        if os.path.islink(path) or os.path.isfile(path):
            os.remove(path)  # save_last="link", or a plain file saved off ckptfs
        elif os.path.isdir(path):
            if ckptfs.state(path) is not None:
                ckptfs.remove(path)
            else:
                raise IsADirectoryError(
                    errno.EISDIR, "CkptfsCheckpointIO: %s is a directory but no ckptfs "
                    "checkpoint; not removing it" % path, path)
        _log.debug("CkptfsCheckpointIO: removed %s", path)

    def _on_ckptfs(self, path):
        if ckptfs.on_ckptfs(path):
            return True
        if self.require_ckptfs:
            raise OSError(errno.ENOTSUP, "CkptfsCheckpointIO: %s is not on a ckptfs mount "
                          "(require_ckptfs=True)" % path, path)
        if not self._warned:
            self._warned = True
            warnings.warn("CkptfsCheckpointIO: %s is not on a ckptfs mount; saving plain "
                          "files as TorchCheckpointIO does (no commit, not atomic; pass "
                          "require_ckptfs=True to make this an error)" % path,
                          RuntimeWarning, stacklevel=3)
        return False
