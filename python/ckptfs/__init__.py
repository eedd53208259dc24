"""Checkpoint transactions on a ckptfs mount, for training scripts.

A checkpoint is a directory whose files, written by N ranks, become valid
together or not at all (docs/checkpoints.md). Everything
here goes through the mount's extended attributes, so it needs nothing but
the standard library and works on every node where ckptfs is mounted::

    import ckptfs
    ckpt = f"/checkpoints/run1/step_{step}"
    ckptfs.declare(ckpt, world_size)          # any rank, or the launcher
    torch.save(shard, f"{ckpt}/rank_{rank}.pt")
    ckptfs.commit(ckpt, rank)                 # waits for all ranks
    ...
    path = ckptfs.latest("/checkpoints/run1")  # newest committed, or None

Install it with ``pip install ./python`` from the repository (or put
``python/`` on ``PYTHONPATH``; ``cmake --install`` also copies it into the
dist-packages directory of Debian's python3). This module needs only the
standard library; ``ckptfs.dcp`` and the framework adapters import torch
when they are imported. Every function is safe to call from any thread or
process.
"""

import errno as _errno
import os as _os

__version__ = "0.1.0"

__all__ = [
    "declare",
    "commit",
    "state",
    "info",
    "latest",
    "checkpoints",
    "keep",
    "remove",
    "set_latest_name",
    "latest_name",
    "parse_info",
    "on_ckptfs",
]

RANKS_XATTR = "user.ckptfs.ranks"
COMMIT_XATTR = "user.ckptfs.commit"  # set "R", or get "user.ckptfs.commit.R"
COMMIT_TIMEOUT_XATTR = "user.ckptfs.commit_timeout_s"
KEEP_XATTR = "user.ckptfs.keep"
REMOVE_XATTR = "user.ckptfs.remove"
STATE_XATTR = "user.ckptfs.state"
INFO_XATTR = "user.ckptfs.info"
CHECKPOINTS_XATTR = "user.ckptfs.checkpoints"
LATEST_XATTR = "user.ckptfs.latest"
LATEST_NAME_XATTR = "user.ckptfs.latest_name"
DEFAULT_LATEST_NAME = "latest"

_NUMERIC_KEYS = (
    "ranks", "arrived", "files", "bytes", "declared_ms", "first_commit_ms",
    "ended_ms", "timeout_s", "errno", "ino", "removing_ms",
)


def _errname(err):
    return _errno.errorcode.get(err, "errno %d" % err)


def _error(err, what, path, reason=""):
    """An OSError (the subclass for `err`, e.g. TimeoutError) saying why."""
    message = "%s: %s (%s)" % (what, _os.strerror(err), _errname(err))
    if reason:
        message += ": " + reason
    elif err in (_errno.EACCES, _errno.EPERM):
        message += (": declaring, committing and changing keep need write permission on the "
                    "directory, removing a checkpoint the right to delete everything in it "
                    "(or owning it); the mount's log names what is missing")
    return OSError(err, message, path)


def _get(path, name):
    """The attribute's value as str, or None if it does not exist."""
    try:
        return _os.getxattr(path, name).decode("utf-8", "surrogateescape")
    except OSError as e:
        if e.errno == _errno.ENODATA:
            return None
        raise


def _set(path, name, value, what):
    try:
        _os.setxattr(path, name, str(value).encode("utf-8", "surrogateescape"))
    except OSError as e:
        raise _error(e.errno, what, path, _reason(path)) from None


def _reason(path):
    """The abort reason of checkpoint `path`, or "" if there is none to read."""
    try:
        text = _get(path, INFO_XATTR)
    except OSError:
        return ""
    if not text:
        return ""
    return parse_info(text).get("reason", "")


def on_ckptfs(path):
    """Whether `path` (or, if it does not exist yet, its nearest existing
    ancestor) lies on a ckptfs mount: its device is one that
    /proc/self/mountinfo lists as fuse.ckptfs. One stat of the path (more
    only for missing levels); True when mountinfo cannot be read (then the
    file system itself answers the calls that follow)."""
    probe = _os.path.abspath(path)
    while True:
        try:
            dev = _os.stat(probe).st_dev
            break
        except (FileNotFoundError, NotADirectoryError):
            parent = _os.path.dirname(probe)
            if parent == probe:
                return False
            probe = parent
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            lines = f.read().decode("utf-8", "surrogateescape").splitlines()
    except OSError:
        return True
    wanted = "%d:%d" % (_os.major(dev), _os.minor(dev))
    for line in lines:
        fields = line.split(" ")
        if len(fields) < 7 or fields[2] != wanted or "-" not in fields[6:]:
            continue
        if fields[fields.index("-", 6) + 1] == "fuse.ckptfs":
            return True
    return False


def _check_on_ckptfs(path):
    """Raises OSError(ENOTSUP) unless `path` lies on a ckptfs mount: on a
    plain file system the attribute writes would be stored and "succeed"
    without any barrier."""
    if not on_ckptfs(path):
        raise OSError(_errno.ENOTSUP, "%s is not on a ckptfs mount" % path, path)


def _unescape_name(text):
    # Names escape space, tab, newline, backslash and '=' as \ooo.
    out = bytearray()
    raw = text.encode("utf-8", "surrogateescape")
    i = 0
    while i < len(raw):
        if (raw[i] == 0x5C and i + 3 < len(raw)
                and all(0x30 <= c <= 0x37 for c in raw[i + 1:i + 4])):
            out.append(int(raw[i + 1:i + 4], 8))
            i += 4
        else:
            out.append(raw[i])
            i += 1
    return out.decode("utf-8", "surrogateescape")


def parse_info(line):
    """Parses one user.ckptfs.info line into a dict.

    Keys: name, state ("pending", "committed", "aborted", "removing"),
    ranks, arrived, files, bytes, declared_ms, first_commit_ms, ended_ms
    (0 while pending), removing_ms (only while removing: when the first
    removal inside it ended it), timeout_s, errno (the abort errno, 0 if
    none), ino (the checkpoint directory's inode) as ints, and reason (the
    abort reason, free text). Unknown keys are kept as strings.
    """
    line = line.rstrip("\r\n")
    result = {}
    head = line
    at = line.find(" reason=")
    if at >= 0:
        head, result["reason"] = line[:at], line[at + len(" reason="):]
    elif line.startswith("reason="):
        head, result["reason"] = "", line[len("reason="):]
    else:
        result["reason"] = ""
    last = None
    for word in head.split(" "):
        if not word:
            continue
        key, eq, value = word.partition("=")
        if not eq:
            if last is None:
                raise ValueError("not a checkpoint info line: %r" % line)
            result[last] += " " + word
            continue
        result[key] = value
        last = key
    if "name" not in result or "state" not in result:
        raise ValueError("not a checkpoint info line: %r" % line)
    result["name"] = _unescape_name(result["name"])
    for key in _NUMERIC_KEYS:
        if key in result:
            result[key] = int(result[key])
    return result


def declare(dir, ranks, timeout_s=None):
    """Declares directory `dir` a checkpoint written by `ranks` ranks.

    Creates `dir` (and its parents) if missing. Declaring again with the
    same number of ranks is harmless, so every rank may call it; another
    number raises OSError(EINVAL). `timeout_s`, if given, is stored as the
    directory's user.ckptfs.commit_timeout_s: the checkpoint aborts unless
    all ranks commit within that many seconds of the first commit (default:
    the parent's attribute, else the metadata service's --commit_timeout_s).
    """
    _check_on_ckptfs(dir)
    _os.makedirs(dir, exist_ok=True)
    _declare_xattrs(dir, ranks, timeout_s)


def _declare_xattrs(dir, ranks, timeout_s):
    """declare() of an existing directory known to be on ckptfs."""
    if timeout_s is not None:
        wanted = str(int(timeout_s))
        # An already ended checkpoint is immutable: set only what differs.
        if _get(dir, COMMIT_TIMEOUT_XATTR) != wanted:
            _set(dir, COMMIT_TIMEOUT_XATTR, wanted,
                 "cannot set the commit timeout of %s" % dir)
    _set(dir, RANKS_XATTR, ranks,
         "cannot declare %s a checkpoint of %s ranks" % (dir, ranks))


def commit(dir, rank):
    """Commits rank `rank` of checkpoint `dir`; blocks until the outcome.

    Call it after closing every file this rank wrote. Returns None once all
    ranks have committed: the checkpoint is then durable, immutable, and the
    run directory's `latest` names it. Raises OSError if the checkpoint
    aborted (TimeoutError for ETIMEDOUT: a rank did not commit in time;
    EBUSY: a file was still open for writing; EIO: a write failed) or the
    request was refused (EINVAL: bad rank, or `dir` is not declared); the
    message holds the errno and the checkpoint's abort reason. Calling it
    again for the same rank waits for, or returns, the same outcome; a
    signal handler running while it waits (EINTR) does not end the wait.

    The commit is a read of user.ckptfs.commit.<rank>: the kernel holds a
    directory's lock through a setxattr on it, so with the setxattr form
    only one rank per node could wait on a checkpoint at a time.
    """
    try:
        _os.stat(dir)
    except OSError as e:
        raise _error(e.errno, "commit of rank %s in %s failed" % (rank, dir), dir) from None
    _check_on_ckptfs(dir)
    _wait_commit(dir, rank)


def _wait_commit(dir, rank):
    """commit() without its checks, for callers that made them already."""
    what = "commit of rank %s in %s failed" % (rank, dir)
    name = "%s.%s" % (COMMIT_XATTR, rank)
    while True:
        try:
            _os.getxattr(dir, name)
            return
        except InterruptedError:
            continue  # the arrival stays recorded; wait for the same outcome
        except OSError as e:
            raise _error(e.errno, what, dir, _reason(dir)) from None


def state(dir):
    """"pending", "committed", "aborted" or "removing" (a committed one
    whose files are being deleted, e.g. by shutil.rmtree); None if `dir` is
    no checkpoint."""
    return _get(dir, STATE_XATTR)


def info(dir):
    """The dict of parse_info() for checkpoint `dir`; None if it is none."""
    text = _get(dir, INFO_XATTR)
    return None if text is None else parse_info(text)


def latest(run_dir):
    """Absolute path of the newest committed checkpoint in `run_dir`, or None.

    Only a committed checkpoint is ever named; resume from it.
    """
    name = _get(run_dir, LATEST_XATTR)
    if not name:
        return None
    return _os.path.join(_os.path.abspath(run_dir), name.rstrip("\n"))


def checkpoints(run_dir, all=False):
    """The checkpoints in `run_dir`, as dicts of parse_info() plus "path".

    Committed ones only (what a resume may use), oldest first; with
    all=True also pending and aborted ones.
    """
    text = _get(run_dir, CHECKPOINTS_XATTR)
    if not text:
        return []
    base = _os.path.abspath(run_dir)
    result = []
    for line in text.splitlines():
        if not line.strip():
            continue
        entry = parse_info(line)
        if not all and entry["state"] != "committed":
            continue
        entry["path"] = _os.path.join(base, entry["name"])
        result.append(entry)
    result.sort(key=lambda e: (e.get("declared_ms", 0), e["name"]))
    return result


def keep(run_dir, k):
    """Keeps only the `k` newest committed checkpoints of `run_dir`.

    On each commit in it, older committed checkpoints and aborted ones are
    removed and their space reclaimed by the servers.
    """
    _set(run_dir, KEEP_XATTR, k, "cannot set retention of %s to %s" % (run_dir, k))


def remove(dir):
    """Removes checkpoint `dir` (any state) and reclaims its space.

    Committed checkpoints are immutable; this is the way to delete one.
    """
    dir = dir.rstrip("/") or "/"
    parent, name = _os.path.split(dir)
    if not name or name in (".", ".."):
        raise ValueError("not a checkpoint directory: %r" % dir)
    _check_on_ckptfs(parent or ".")
    try:
        _os.setxattr(parent or ".", REMOVE_XATTR, name.encode("utf-8", "surrogateescape"))
    except OSError as e:
        raise _error(e.errno, "cannot remove %s" % dir, dir) from None


def set_latest_name(run_dir, name):
    """Names the symlink by which `run_dir` points at its newest committed
    checkpoint: `name` (a file name in `run_dir`), or "" for no symlink.

    The default is "latest". A framework that keeps its own file of that
    name in the run directory (DeepSpeed writes a plain file `latest`)
    needs another name, or none; ckptfs.latest(run_dir) answers either way.
    Raises ValueError for a name that is not a single file name, and
    OSError if the mount refuses it (EINVAL; ENOTSUP from a ckptfs that
    predates the attribute).
    """
    name = _os.fspath(name)
    if name and ("/" in name or name in (".", "..") or "\0" in name):
        raise ValueError("the latest symlink's name must be a file name in %s, or '' for "
                         "none, not %r" % (run_dir, name))
    _check_on_ckptfs(run_dir)
    _set(run_dir, LATEST_NAME_XATTR, name,
         "cannot name the latest symlink of %s %r" % (run_dir, name))


def latest_name(run_dir):
    """The name of `run_dir`'s latest symlink (set_latest_name): "latest"
    unless another was set, "" if the run directory keeps none."""
    name = _get(run_dir, LATEST_NAME_XATTR)
    return DEFAULT_LATEST_NAME if name is None else name
