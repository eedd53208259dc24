"""torch.distributed.checkpoint (DCP) on ckptfs: a writer whose save commits
the checkpoint, and a reader that loads committed checkpoints only.

    import torch.distributed.checkpoint as dcp
    from ckptfs.dcp import CkptfsWriter, CkptfsReader

    dcp.save(state, storage_writer=CkptfsWriter(f"/checkpoints/run1/step_{step}"))
    dcp.load(state, storage_reader=CkptfsReader("/checkpoints/run1"))  # its latest

Both are the stock FileSystemWriter/FileSystemReader (same files, same
format: any DCP reader loads what CkptfsWriter wrote), with the checkpoint
transaction added where DCP's own collectives already synchronize the ranks,
so that a save costs one metadata round trip per rank more than the stock
writer, and no fsync at all:

 1. Planning. DCP gathers every rank's plan on the coordinator (rank 0 of
    the process group) and scatters the final plans back. The coordinator's
    prepare_global_plan declares the checkpoint with one rank per plan
    before that scatter, so no rank writes into an undeclared directory.
 2. Writing. Every rank writes its files as the stock writer does, without
    fsync (the commit makes the whole checkpoint durable with one sync per
    storage server), closes them, and then reports its arrival at the
    commit barrier from a background thread.
 3. Finishing. DCP gathers the write results on the coordinator, whose
    finish() writes `.metadata` and then commits rank 0: that call returns
    once every rank has arrived and the checkpoint is committed (durable,
    immutable, named by the run directory's `latest`). DCP broadcasts the
    outcome, so dcp.save returns on every rank only after the commit, or
    raises the abort's error (ETIMEDOUT, EIO, ... with the reason) on every
    rank.

A rank whose writes raise removes the pending checkpoint, so the others stop
waiting at once; a rank that dies leaves the others' arrivals to the commit
timeout (CkptfsWriter(commit_timeout_s=...), else the directory's or the
service's), which aborts it. Either way the checkpoint never shows as
committed. dcp.async_save works the same way in its background thread: the
checkpoint commits when the background save finishes, and a failure is
raised by the returned future.

On a directory that is not on a ckptfs mount both classes warn once and fall
back to the stock behaviour (the writer then fsyncs every file, as the stock
writer does by default): the same script runs on a laptop. Pass
require_ckptfs=True to make that an error instead.

Needs torch >= 2.2 (DCP's save/load API).
"""

import dataclasses
import errno
import logging
import os
import threading
import warnings

from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter

import ckptfs

__all__ = ["CkptfsWriter", "CkptfsReader", "NotCommittedError", "resolve_committed"]

_log = logging.getLogger(__name__)


class NotCommittedError(OSError):
    """A checkpoint that is pending, aborted or being removed was asked for
    where only a committed one may be loaded."""


def _fallback_warning(cls_name, path, what):
    warnings.warn(
        "%s: %s is not on a ckptfs mount; %s (pass require_ckptfs=True to make "
        "this an error)" % (cls_name, path, what),
        RuntimeWarning,
        stacklevel=3,
    )


def _not_on_ckptfs(cls_name, path):
    return OSError(errno.ENOTSUP, "%s: %s is not on a ckptfs mount (require_ckptfs=True)"
                   % (cls_name, path), str(path))


class CkptfsWriter(FileSystemWriter):
    """FileSystemWriter whose dcp.save (or dcp.async_save) commits the
    checkpoint: see the module documentation for the protocol.

    `path` is the checkpoint directory, one per save (e.g.
    /checkpoints/run1/step_1000); its parent is the run directory, whose
    `latest` names the newest committed checkpoint. Saving again under the
    name of a committed checkpoint raises (committed checkpoints are
    immutable: remove it with ckptfs.remove first); a pending or aborted one
    left by an earlier failed attempt (with files in it, or ranks arrived)
    is removed and declared anew.

    Keyword arguments beyond FileSystemWriter's:
      commit_timeout_s: abort unless every rank arrives within this many
        seconds of the first arrival (default: the directory's
        user.ckptfs.commit_timeout_s, else the metadata service's).
      keep: if given, the run directory keeps only the `keep` newest
        committed checkpoints (ckptfs.keep), applied at each commit.
      require_ckptfs: raise instead of falling back off a ckptfs mount.
    sync_files defaults to False here: the commit syncs the checkpoint.
    """

    def __init__(self, path, single_file_per_rank=True, sync_files=None, thread_count=1,
                 per_thread_copy_ahead=10_000_000, *args, commit_timeout_s=None, keep=None,
                 require_ckptfs=False, **kwargs):
        super().__init__(path, single_file_per_rank, bool(sync_files), thread_count,
                         per_thread_copy_ahead, *args, **kwargs)
        self._sync_files_given = sync_files
        self.commit_timeout_s = commit_timeout_s
        self.keep = keep
        self.require_ckptfs = require_ckptfs
        self._on_ckptfs = None
        self._is_coordinator = False
        self._commit_rank = None
        self._declared_ranks = None
        self._arrival = None

    # Threads are not pickled (dcp.async_save with a process executor
    # sends the writer to another process).
    def __getstate__(self):
        state = self.__dict__.copy()
        state["_arrival"] = None
        return state

    def reset(self, checkpoint_id=None):
        super().reset(checkpoint_id)
        self._on_ckptfs = None
        self._declared_ranks = None
        self._arrival = None

    def set_up_storage_writer(self, is_coordinator, *args, **kwargs):
        super().set_up_storage_writer(is_coordinator, *args, **kwargs)
        self._is_coordinator = is_coordinator
        self._commit_rank = kwargs.get("rank")
        if self._commit_rank is None:
            self._commit_rank = _default_rank()
        self._on_ckptfs = ckptfs.on_ckptfs(self.path)
        if not self._on_ckptfs:
            if self.require_ckptfs:
                raise _not_on_ckptfs("CkptfsWriter", self.path)
            if self._sync_files_given is None:
                self.sync_files = True
            if is_coordinator:
                _fallback_warning("CkptfsWriter", self.path,
                                  "saving with the stock FileSystemWriter behaviour: "
                                  "no commit barrier, the checkpoint is not atomic")

    def prepare_local_plan(self, plan):
        if self._on_ckptfs and not self.use_collectives:
            # Every rank finishes by itself: each declares (the same number
            # of ranks is harmless) and commits in its own finish().
            self._declared_ranks = _default_world_size()
            self._declare(self._declared_ranks)
        with warnings.catch_warnings():
            # The stock writer warns that it overwrites an existing
            # checkpoint; here the declaration decides (see _declare).
            warnings.filterwarnings("ignore", message="Detected an existing checkpoint")
            return super().prepare_local_plan(plan)

    def prepare_global_plan(self, plans):
        plans = super().prepare_global_plan(plans)
        if self._on_ckptfs and self.use_collectives:
            self._declared_ranks = len(plans)
            self._declare(self._declared_ranks)
        return plans

    def write_data(self, plan, planner):
        try:
            future = super().write_data(plan, planner)
            future.wait()
            future.value()
        except BaseException:
            self._abort_after_failure()
            raise
        if self._on_ckptfs and self.use_collectives and not self._is_coordinator:
            self._arrive_in_background()
        return future

    def finish(self, metadata, results):
        try:
            super().finish(metadata, results)
        except BaseException:
            self._abort_after_failure()
            raise
        if self._on_ckptfs:
            ckptfs._wait_commit(os.fspath(self.path), self._commit_rank)

    def _declare(self, ranks):
        """Declares self.path a checkpoint of `ranks` ranks, first clearing
        what an earlier failed attempt left under that name."""
        path = os.fspath(self.path)
        try:
            info = ckptfs.info(path)
            exists = True
        except FileNotFoundError:
            info, exists = None, False
        state = info["state"] if info else None
        if state == "committed":
            raise FileExistsError(
                errno.EEXIST,
                "CkptfsWriter: %s is already a committed checkpoint, and committed "
                "checkpoints are immutable; save under a new name, or remove it first "
                "with ckptfs.remove()" % path, path)
        if state is not None:
            # A pending one that a rank reached or wrote into is what an
            # attempt left; one declared and still empty (a launcher that
            # declares ahead) is used as it is.
            stale = (state != "pending" or info.get("arrived", 0) > 0
                     or len(os.listdir(path)) > 0)
            if stale:
                _log.warning("CkptfsWriter: removing %s checkpoint %s (%s of %s ranks "
                             "arrived) left by an earlier attempt before saving again",
                             state, path, info.get("arrived"), info.get("ranks"))
                try:
                    ckptfs.remove(path)
                except FileNotFoundError:
                    pass
                exists = False
        if not exists:
            os.makedirs(path, exist_ok=True)
        ckptfs._declare_xattrs(path, ranks, self.commit_timeout_s)
        if self.keep is not None:
            run_dir = os.path.dirname(os.path.abspath(path))
            ckptfs.keep(run_dir, self.keep)

    def _arrive_in_background(self):
        path, rank = os.fspath(self.path), self._commit_rank
        arrival = _Arrival(path, rank)
        self._arrival = arrival
        arrival.start()

    def _abort_after_failure(self):
        """This rank cannot deliver its part: remove the pending checkpoint
        so that no rank waits for it (it would abort at its timeout)."""
        if not self._on_ckptfs:
            return
        path = os.fspath(self.path)
        try:
            if ckptfs.state(path) == "pending":
                ckptfs.remove(path)
                _log.warning("CkptfsWriter: rank %s failed to write %s; removed the "
                             "pending checkpoint", self._commit_rank, path)
        except FileNotFoundError:
            pass  # another failing rank removed it first
        except OSError as e:
            _log.warning("CkptfsWriter: rank %s failed to write %s and could not remove "
                         "the pending checkpoint (%s); it aborts at its commit timeout",
                         self._commit_rank, path, e)

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        return ckptfs.on_ckptfs(os.fspath(checkpoint_id))


class _Arrival:
    """One rank's arrival at a checkpoint's commit barrier, waited for on a
    daemon thread (DCP's coordinator waits for the outcome and broadcasts
    it; the thread only has to keep the arrival's long poll open)."""

    def __init__(self, path, rank):
        self.path = path
        self.rank = rank
        self.error = None
        self._thread = threading.Thread(target=self._run, name="ckptfs-commit-%s" % rank,
                                        daemon=True)

    def start(self):
        self._thread.start()

    def _run(self):
        try:
            ckptfs._wait_commit(self.path, self.rank)
        except OSError as e:
            self.error = e
            _log.debug("CkptfsWriter: commit of rank %s in %s: %s", self.rank, self.path, e)


def _default_rank():
    import torch.distributed as dist
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def _default_world_size():
    import torch.distributed as dist
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def resolve_committed(path):
    """The committed checkpoint `path` stands for: `path` itself if it is a
    committed checkpoint, the newest committed checkpoint if it is a run
    directory (its `latest`). Raises NotCommittedError for a checkpoint
    that is pending, aborted or being removed, and FileNotFoundError for a
    run directory without a committed checkpoint. A directory on the mount
    that is neither (a stock DCP checkpoint saved without a commit) is
    returned as it is."""
    path = os.fspath(path)
    state = ckptfs.state(path)
    if state == "committed":
        return path
    if state is not None:
        info = ckptfs.info(path) or {}
        detail = "%s of %s ranks arrived" % (info.get("arrived"), info.get("ranks"))
        if info.get("reason"):
            detail += "; " + info["reason"]
        raise NotCommittedError(
            errno.EINVAL,
            "%s is a %s checkpoint (%s), which may be incomplete; load a committed one "
            "(give the run directory to load its latest, or see `ckptfs ckpt ls --all %s`)"
            % (path, state, detail, os.path.dirname(os.path.abspath(path))), path)
    newest = ckptfs.latest(path)
    if newest is not None:
        return newest
    if os.path.exists(os.path.join(path, ".metadata")):
        return path
    raise FileNotFoundError(
        errno.ENOENT,
        "%s is neither a committed checkpoint nor a run directory with one "
        "(`ckptfs ckpt ls --all %s` lists its checkpoints in every state)" % (path, path),
        path)


@dataclasses.dataclass(frozen=True)
class _ResolvedCheckpoint:
    """What a rank resolved the reader's path to, carried in its load plan
    so that the coordinator can check every rank loads the same one."""
    given: str
    resolved: str


class CkptfsReader(FileSystemReader):
    """FileSystemReader that loads committed checkpoints only.

    `path` may be a committed checkpoint, or a run directory: its newest
    committed checkpoint (`latest`) is loaded, resolved once per load, and
    every rank is checked to have resolved the same one (a commit landing
    between two ranks' resolutions is an error, not a mix of two steps). A
    pending or aborted checkpoint raises NotCommittedError, at construction
    and again when a load starts (the path is resolved at both). `resolved`
    holds the checkpoint directory being loaded.

    Off a ckptfs mount it warns once and loads the directory as the stock
    reader does, or raises with require_ckptfs=True.
    """

    def __init__(self, path, *args, require_ckptfs=False, **kwargs):
        super().__init__(path, *args, **kwargs)
        self.require_ckptfs = require_ckptfs
        self.given = os.fspath(path)
        self.resolved = None
        self._resolve()

    def reset(self, checkpoint_id=None):
        super().reset(checkpoint_id)
        if checkpoint_id:
            self.given = os.fspath(checkpoint_id)
        self._resolve()

    def read_metadata(self, *args, **kwargs):
        # Each load starts here on every rank: resolve again, so that a
        # reader made before the newest commit loads the newest.
        self._resolve()
        return super().read_metadata(*args, **kwargs)

    def _resolve(self):
        if not ckptfs.on_ckptfs(self.given):
            if self.require_ckptfs:
                raise _not_on_ckptfs("CkptfsReader", self.given)
            _fallback_warning("CkptfsReader", self.given,
                              "loading it as the stock FileSystemReader would, without "
                              "checking that it was committed")
            self.resolved = self.given
        else:
            self.resolved = resolve_committed(self.given)
        self.path = self.fs.init_path(self.resolved)

    def prepare_local_plan(self, plan):
        plan = super().prepare_local_plan(plan)
        if plan.storage_data is None:
            plan = dataclasses.replace(
                plan, storage_data=_ResolvedCheckpoint(self.given, self.resolved))
        return plan

    def prepare_global_plan(self, plans):
        seen = sorted({p.storage_data.resolved for p in plans
                       if isinstance(p.storage_data, _ResolvedCheckpoint)})
        if len(seen) > 1:
            raise RuntimeError(
                "CkptfsReader: the ranks resolved %s to different checkpoints (%s): one "
                "committed while the load started; load again, or name the checkpoint"
                % (self.given, ", ".join(seen)))
        plans = [dataclasses.replace(p, storage_data=None)
                 if isinstance(p.storage_data, _ResolvedCheckpoint) else p for p in plans]
        return super().prepare_global_plan(plans)

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        return ckptfs.on_ckptfs(os.fspath(checkpoint_id))
