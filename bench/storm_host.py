"""What torch_storm.py reads from the machine it runs on: which file
system holds a directory, the ckptfs daemons serving a mount and the CPU
time they used, and the page cache (dropped before each phase when root).
Only /proc and the standard library; every function may be called from
any thread.
"""

import os

DAEMONS = ("ckptfs-fuse", "ckptfs-storage", "ckptfs-meta")


def mount_of(path):
    """(mount point, file system type) of the mount holding `path`
    (/proc/self/mountinfo)."""
    path = os.path.realpath(path)
    best, best_type = "", ""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            mount_point = left.split()[4].replace("\\040", " ")
            inside = path == mount_point or path.startswith(mount_point.rstrip("/") + "/")
            if inside and len(mount_point) >= len(best):
                best, best_type = mount_point, right.split()[0]
    return best, best_type


def fs_type(path):
    """The file system type of the mount holding `path`."""
    return mount_of(path)[1]


def ckptfs_daemons():
    """{pid: (name, {flag: value})} of every ckptfs daemon on this machine,
    from their command lines (--flag=value or --flag value)."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                name = f.read().strip()
            if name not in DAEMONS:
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                words = f.read().decode("utf-8", "surrogateescape").split("\0")
        except OSError:
            continue  # gone meanwhile
        flags = {}
        for i, word in enumerate(words):
            if word.startswith("--"):
                key, eq, value = word[2:].partition("=")
                if not eq and i + 1 < len(words) and not words[i + 1].startswith("--"):
                    value = words[i + 1]
                flags[key] = value
        found[int(pid)] = (name, flags)
    return found


def serving_daemons(root):
    """PIDs of the ckptfs daemons serving the mount holding `root`: its
    ckptfs-fuse, and the ckptfs-meta and ckptfs-storage of that mount's
    metadata address. None when they are not found (then every ckptfs
    daemon on this machine is counted)."""
    mount_point, kind = mount_of(root)
    if kind != "fuse.ckptfs":
        return None
    daemons = ckptfs_daemons()
    fuse = [(pid, flags) for pid, (name, flags) in daemons.items() if name == "ckptfs-fuse"
            and os.path.realpath(flags.get("mountpoint", "")) == mount_point]
    if len(fuse) != 1 or not fuse[0][1].get("meta"):
        return None
    meta = fuse[0][1]["meta"]
    pids = [fuse[0][0]] + [pid for pid, (name, flags) in daemons.items()
                           if (name == "ckptfs-meta" and flags.get("listen") == meta)
                           or (name == "ckptfs-storage" and flags.get("meta") == meta)]
    return sorted(pids) if len(pids) > 1 else None


def daemon_cpu_seconds(pids=None):
    """CPU seconds used so far by the ckptfs daemons `pids`, or by every
    ckptfs daemon on this machine."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in (pids if pids is not None else ckptfs_daemons()):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return total


def drop_caches():
    """sync, then drop the page cache (root only). True when dropped."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
        return True
    except OSError:
        return False
