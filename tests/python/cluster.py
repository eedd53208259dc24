"""A real ckptfs cluster for the Python tests: `ckptfs up` (one metadata
service on RocksDB, storage servers, a FUSE mount) in a temporary
directory on 127.0.0.1, and `ckptfs down` when done.

The binaries come from $CKPTFS_BIN_DIR (CTest sets it to the build's bin/).
Ports are looked for below the kernel's ephemeral range, so that no
outgoing connection of another test holds one between the check and the
bind. Everything started is stopped and unmounted by stop(), which the
fixtures call on success and on failure alike; a mount left by a killed
test process is unmounted by scripts/run-tests.sh (its path has the
ckptfs-it- prefix it looks for).
"""

import os
import random
import shutil
import socket
import subprocess
import tempfile


def bin_dir():
    path = os.environ.get("CKPTFS_BIN_DIR")
    if not path:
        raise RuntimeError("CKPTFS_BIN_DIR is not set: run the Python tests through ctest, "
                           "or export CKPTFS_BIN_DIR=<build>/bin")
    return path


def _port_free(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_block(count, low=20000, high=32000):
    """The first of `count` consecutive ports that are free now."""
    for _ in range(200):
        base = random.randrange(low, high - count)
        if all(_port_free(base + i) for i in range(count)):
            return base
    raise RuntimeError("no %d consecutive free ports in [%d, %d)" % (count, low, high))


class Cluster:
    """`ckptfs up` in a fresh temporary directory; `mount` is the mountpoint."""

    def __init__(self, servers=4, replicas=1, orphan_grace_s=2, metrics=False, extra_args=()):
        self.root = tempfile.mkdtemp(prefix="ckptfs-it-py-", dir="/var/tmp")
        self.state_dir = os.path.join(self.root, "state")
        self.mount = os.path.join(self.root, "mnt")
        self.ckptfs = os.path.join(bin_dir(), "ckptfs")
        base = free_port_block(servers + 1)
        self.meta_port = base
        # Metrics: the metadata service on metrics_port, storage server i on
        # metrics_port + 1 + i, the mount after them.
        self.metrics_port = free_port_block(servers + 2) if metrics else 0
        args = [self.ckptfs, "up", "--state-dir", self.state_dir, "--mountpoint", self.mount,
                "--host", "127.0.0.1", "--meta-port", str(base),
                "--storage-port", str(base + 1), "--servers", str(servers),
                "--replicas", str(replicas), "--orphan-grace-s", str(orphan_grace_s),
                "--metrics-port", str(self.metrics_port), "--no-repair", *extra_args]
        self._up = False
        result = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, timeout=120)
        self._up = True  # whatever started must be stopped, even after a failed up
        if result.returncode != 0:
            logs = self.describe_logs()
            self.stop()
            raise RuntimeError("ckptfs up failed (%d):\n%s\n%s"
                               % (result.returncode, result.stdout, logs))

    def describe_logs(self, tail=40):
        """The last lines of every daemon's log, for failure messages."""
        out = []
        logs = os.path.join(self.state_dir, "logs")
        if os.path.isdir(logs):
            for name in sorted(os.listdir(logs)):
                with open(os.path.join(logs, name), "rb") as f:
                    lines = f.read().decode("utf-8", "replace").splitlines()[-tail:]
                out.append("== %s\n%s" % (name, "\n".join(lines)))
        return "\n".join(out)

    def meta_metrics(self):
        """The metadata service's Prometheus metrics: {"name{labels}": value}."""
        import urllib.request
        url = "http://127.0.0.1:%d/metrics" % self.metrics_port
        with urllib.request.urlopen(url, timeout=10) as reply:
            text = reply.read().decode()
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                out[key] = float(value)
        return out

    def run_cli(self, *args):
        """`ckptfs ARGS...`; returns the CompletedProcess (text, merged output)."""
        return subprocess.run([self.ckptfs, *args], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=120)

    def stop(self):
        if self._up:
            self._up = False
            subprocess.run([self.ckptfs, "down", "--state-dir", self.state_dir],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
        if os.path.ismount(self.mount):
            subprocess.run(["fusermount3", "-u", "-z", self.mount],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not os.path.ismount(self.mount):
            shutil.rmtree(self.root, ignore_errors=True)
