"""DeepSpeed on ckptfs: a checkpoint engine whose engine.save_checkpoint
commits the tag directory as one checkpoint of every rank.

    import deepspeed
    import ckptfs.deepspeed

    engine, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=cfg)
    ckptfs.deepspeed.install(engine)
    engine.save_checkpoint("/checkpoints/run1", tag=f"step{step}")   # committed on return
    engine.load_checkpoint("/checkpoints/run1")                       # DeepSpeed's `latest`

engine.save_checkpoint(save_dir, tag) writes save_dir/tag on every rank
(the model states from data-parallel rank 0, each rank's ZeRO optimizer
partition), then calls the checkpoint engine's commit(tag) on every rank,
then rank 0 writes the plain file save_dir/latest naming the tag. The
engine installed here (a TorchCheckpointEngine, so the files are the same)
adds the checkpoint transaction:

 - create(tag), on every rank before any file of the tag is written: rank 0
   removes what stands under the tag (a committed checkpoint saved again
   under its name, with a warning, or what a failed attempt left), names
   ckptfs's pointer symlink of save_dir `latest_name` so that DeepSpeed's
   own `latest` file can exist beside it (ckptfs.set_latest_name), and
   declares save_dir/tag a checkpoint of world-size ranks; then every rank
   declares it too (a check) once rank 0 is done. An error on rank 0 is
   raised on every rank.
 - save(): a rank whose write raises removes the pending checkpoint, so the
   others' commits fail at once instead of at the commit timeout.
 - commit(tag), on every rank: returns once all ranks have arrived; the tag
   is then durable and immutable, and raises if it aborted (a rank died or
   a write failed; the error says why). DeepSpeed writes `latest` only
   after that, so its `latest` never names a checkpoint that is not
   committed.

Loading needs nothing: DeepSpeed reads its `latest` file, or the tag given.
latest_tag(save_dir) is the newest committed tag by ckptfs's own record,
for loading with save_latest=False, or from a ckptfs that predates
user.ckptfs.latest_name (there the pointer can only be called `latest`, so
saving with save_latest=True raises before writing anything).

keep=K makes the commit of each tag remove all but the K newest committed
tags of save_dir and give their space back (ckptfs.keep); K >= 2, because
DeepSpeed's `latest` file names the previous tag until rank 0 rewrites it.

Off a ckptfs mount the engine warns once and saves as DeepSpeed's own does
(require_ckptfs=True makes that an error). DeepSpeed calls the engine from
each rank's training thread.
"""

import errno
import logging
import os
import warnings

from deepspeed.runtime.checkpoint_engine.torch_checkpoint_engine import TorchCheckpointEngine

import ckptfs

__all__ = ["CkptfsCheckpointEngine", "install", "latest_tag", "DEFAULT_LATEST_NAME"]

# ckptfs's pointer symlink in a DeepSpeed save_dir: `latest` is DeepSpeed's.
DEFAULT_LATEST_NAME = "latest_committed"

_log = logging.getLogger(__name__)


def install(engine, **kwargs):
    """Replaces `engine`'s checkpoint engine (DeepSpeed's default
    TorchCheckpointEngine) by a CkptfsCheckpointEngine(engine's config,
    **kwargs); returns the new checkpoint engine. Call it on every rank,
    after deepspeed.initialize and before the first save_checkpoint."""
    current = getattr(engine, "checkpoint_engine", None)
    if current is None:
        raise ValueError("ckptfs.deepspeed.install: %r has no checkpoint_engine; pass the "
                         "engine deepspeed.initialize returned" % (engine,))
    if type(current) is not TorchCheckpointEngine and not isinstance(
            current, CkptfsCheckpointEngine):
        raise ValueError("ckptfs.deepspeed.install replaces DeepSpeed's TorchCheckpointEngine, "
                         "but this engine is configured with %s (the checkpoint.writer or "
                         "datastates settings); remove those settings to save through ckptfs"
                         % type(current).__name__)
    if engine.use_node_local_storage():
        raise ValueError("ckptfs.deepspeed.install: checkpoint.use_node_local_storage saves "
                         "one copy per node, and ckptfs is one file system shared by all "
                         "nodes; turn it off")
    engine.checkpoint_engine = CkptfsCheckpointEngine(engine._config, **kwargs)
    return engine.checkpoint_engine


def latest_tag(save_dir):
    """The newest committed tag of `save_dir` by ckptfs's record (not
    DeepSpeed's `latest` file), or None: engine.load_checkpoint(save_dir,
    tag=latest_tag(save_dir))."""
    path = ckptfs.latest(save_dir)
    return None if path is None else os.path.basename(path)


class CkptfsCheckpointEngine(TorchCheckpointEngine):
    """TorchCheckpointEngine that commits each tag; see the module docstring.

    Keyword arguments:
      commit_timeout_s: abort a tag unless every rank commits within this
        many seconds of the first (default: save_dir's
        user.ckptfs.commit_timeout_s, else the metadata service's).
      latest_name: the name of ckptfs's pointer symlink in save_dir when
        DeepSpeed writes its own `latest` file (save_latest=True), or "" for
        none.
      keep: keep only the `keep` (>= 2) newest committed tags of save_dir.
      require_ckptfs: raise instead of saving without commits off a mount.
    """

    def __init__(self, config_params=None, *, commit_timeout_s=None,
                 latest_name=DEFAULT_LATEST_NAME, keep=None, require_ckptfs=False):
        super().__init__(config_params)
        if keep is not None and int(keep) < 2:
            raise ValueError("CkptfsCheckpointEngine(keep=%r): keep at least 2 tags, since "
                             "DeepSpeed's `latest` file names the previous tag until the new "
                             "one's commit returns" % (keep,))
        if latest_name == "latest":
            raise ValueError("CkptfsCheckpointEngine(latest_name='latest'): that is the name "
                             "of DeepSpeed's own file; choose another, or '' for none")
        self.name = "CkptfsCheckpointEngine"
        self.commit_timeout_s = commit_timeout_s
        self.latest_name = latest_name
        self.keep = keep
        self.require_ckptfs = require_ckptfs
        self._path = None      # the tag directory being saved, on ckptfs
        self._warned = False

    def create(self, info):
        super().create(info)
        path = os.path.abspath(os.path.join(info.save_dir, str(info.tag)))
        self._path = path if self._on_ckptfs(info.save_dir) else None
        if self._path is None:
            return
        import torch.distributed as dist
        rank, world = dist.get_rank(), dist.get_world_size()
        error = None
        if rank == 0:
            try:
                self._prepare(info, path, world)
            except Exception as e:  # raised on every rank below
                error = "%s: %s" % (type(e).__name__, e)
        outcome = [error]
        dist.broadcast_object_list(outcome, src=0)
        if outcome[0] is not None:
            self._path = None
            raise RuntimeError("CkptfsCheckpointEngine: cannot save tag %s in %s: %s"
                               % (info.tag, info.save_dir, outcome[0]))
        if rank != 0:
            ckptfs.declare(path, world, timeout_s=self.commit_timeout_s)

    def makedirs(self, path, exist_ok=False):
        # DeepSpeed makes the tag's directory again before each file it
        # saves. Once a failing rank removed the pending tag, making it
        # again would leave a plain directory of this save's files behind:
        # fail this rank's save instead, as its commit would.
        if self._path is not None and os.path.abspath(path) == self._path \
                and not os.path.isdir(path):
            raise FileNotFoundError(
                errno.ENOENT, "CkptfsCheckpointEngine: checkpoint %s was removed while "
                "this rank was saving into it (another rank's save failed)" % path, path)
        super().makedirs(path, exist_ok=exist_ok)

    def save(self, state_dict, path):
        try:
            super().save(state_dict, path)
        except BaseException:
            self._abort_after_failure()
            raise

    def commit(self, info):
        path = os.path.abspath(os.path.join(info.save_dir, str(info.tag)))
        if self._path != path:
            return super().commit(info)
        import torch.distributed as dist
        ckptfs.commit(path, dist.get_rank())
        self._path = None
        return True

    def _prepare(self, info, path, world):
        if info.save_latest and self.latest_name != ckptfs.latest_name(info.save_dir):
            try:
                ckptfs.set_latest_name(info.save_dir, self.latest_name)
            except OSError as e:
                if e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
                    raise
                raise OSError(e.errno, "this ckptfs cannot rename the pointer symlink `latest` "
                              "(user.ckptfs.latest_name: %s), which DeepSpeed's own `latest` "
                              "file would collide with; upgrade ckptfs, or save with "
                              "save_latest=False and load with "
                              "tag=ckptfs.deepspeed.latest_tag(save_dir)"
                              % os.strerror(e.errno)) from None
        if os.path.lexists(path):
            state = ckptfs.state(path) if os.path.isdir(path) else None
            if state is None:
                raise FileExistsError(errno.EEXIST, "%s exists and is not a ckptfs checkpoint "
                                      "(saved without CkptfsCheckpointEngine); use another "
                                      "tag or move it away" % path, path)
            if state == "committed":
                _log.warning("CkptfsCheckpointEngine: replacing committed tag %s", path)
            else:
                _log.warning("CkptfsCheckpointEngine: removing %s tag %s left by an earlier "
                             "attempt", state, path)
            ckptfs.remove(path)
        ckptfs.declare(path, world, timeout_s=self.commit_timeout_s)
        if self.keep is not None:
            ckptfs.keep(info.save_dir, int(self.keep))

    def _abort_after_failure(self):
        if self._path is None:
            return
        try:
            if ckptfs.state(self._path) == "pending":
                ckptfs.remove(self._path)
                _log.warning("CkptfsCheckpointEngine: a write failed; removed the pending "
                             "checkpoint %s", self._path)
        except OSError as e:
            _log.warning("CkptfsCheckpointEngine: a write failed and the pending checkpoint "
                         "%s could not be removed (%s); it aborts at its commit timeout",
                         self._path, e)

    def _on_ckptfs(self, save_dir):
        if ckptfs.on_ckptfs(save_dir):
            return True
        if self.require_ckptfs:
            raise OSError(errno.ENOTSUP, "CkptfsCheckpointEngine: %s is not on a ckptfs "
                          "mount (require_ckptfs=True)" % save_dir, save_dir)
        if not self._warned:
            self._warned = True
            warnings.warn("CkptfsCheckpointEngine: %s is not on a ckptfs mount; saving as "
                          "DeepSpeed's TorchCheckpointEngine does, without a commit (pass "
                          "require_ckptfs=True to make this an error)" % save_dir,
                          RuntimeWarning, stacklevel=3)
        return False
