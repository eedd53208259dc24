"""Rank processes forked from a warm interpreter: a rank script's imports
(torch, torch.distributed.checkpoint, a training framework) cost seconds of
CPU per process, and a test file starts dozens of ranks of one script.

`Zygote(script)` starts `python rank_zygote.py SCRIPT`, which imports the
script as a module (its `if __name__ == "__main__"` block does not run) and
then forks one rank process per request: the child becomes the leader of a
new session (its process group is the rank's, as with Popen's
start_new_session), writes its output to a file, takes the environment and
argv of the request, and calls the script's main(); it exits as the
interpreter would (non-daemon threads joined, atexit handlers run) with
main()'s exit status, or with whatever os._exit the scenario calls.
The zygote reaps its children and reports each exit status.

Where the script's imports started a thread, Python's or a native one (a
fork would copy its locks in whatever state they are), the zygote says so
and the ranks are started as fresh interpreters instead, the same way for
the caller.

Protocol, one line each way (the zygote's stdin and stdout):
  zygote -> "READY" or "THREADED <n>", once, after the imports;
  caller -> JSON {"argv": [...], "env": {...}, "output": PATH, "tag": TAG};
  zygote -> "STARTED <pid>" for it;
  zygote -> "EXITED <tag> <pid> <returncode> <time.time() at reaping>" per
            child, TAG the request's (a word), so that a late exit of an
            earlier rank is never taken for that of a later one.
The zygote exits when its stdin closes.
"""

import atexit
import importlib.util
import json
import os
import select
import subprocess
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


def _returncode(status):
    """A wait status as subprocess reports it: the exit code, or -signal."""
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


class Zygote:
    """The caller's side: starts the zygote of `script` (a file beside this
    one) and rank processes through it. Not thread-safe."""

    def __init__(self, script, env):
        self.script = os.path.join(HERE, script)
        self._proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), self.script], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, env=env, start_new_session=True)
        self._buffer = b""
        self._gone = False  # the zygote's stdout ended
        hello = self._line(timeout=300)
        if not hello or hello.split()[0] not in ("READY", "THREADED"):
            self.close()
            raise RuntimeError("the zygote of %s did not start: %r" % (script, hello))
        self.forks = hello == "READY"
        self._fresh = {}  # pid -> (tag, Popen), where ranks are fresh interpreters
        self._exited = []  # (tag, pid, returncode, reaped_at) not yet collected

    def start(self, argv, env, output, tag):
        """Starts a rank: `argv` after the interpreter (argv[0] the script),
        `env` its whole environment, stdout and stderr into `output`; its
        exit is reported with `tag` (a word). Returns its pid."""
        if not self.forks:
            with open(output, "wb") as out:
                proc = subprocess.Popen([sys.executable, *argv], stdout=out,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        env=env, start_new_session=True)
            self._fresh[proc.pid] = (tag, proc)
            return proc.pid
        request = json.dumps({"argv": argv, "env": env, "output": output, "tag": tag})
        self._proc.stdin.write(request.encode() + b"\n")
        self._proc.stdin.flush()
        while True:
            line = self._line(timeout=60)
            if line is None:
                raise RuntimeError("the zygote of %s stopped answering" % self.script)
            if line.startswith("STARTED "):
                return int(line.split()[1])
            self._note(line)

    def exits(self, timeout):
        """The (tag, pid, returncode, reaped_at) of ranks that exited since
        the last call, waiting up to `timeout` seconds for one."""
        if not self.forks:
            deadline = time.monotonic() + timeout
            while True:
                for pid, (tag, proc) in list(self._fresh.items()):
                    if proc.poll() is not None:
                        del self._fresh[pid]
                        self._exited.append((tag, pid, proc.returncode, time.time()))
                if self._exited or time.monotonic() >= deadline:
                    break
                time.sleep(0.05)
        else:
            line = self._line(timeout=0 if self._exited else timeout)
            while line is not None:
                self._note(line)
                line = self._line(timeout=0)
            if self._gone:
                raise RuntimeError("the zygote of %s exited" % self.script)
        out, self._exited = self._exited, []
        return out

    def close(self):
        self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._proc.stdout.close()

    def _note(self, line):
        if line.startswith("EXITED "):
            _, tag, pid, code, at = line.split()
            self._exited.append((tag, int(pid), int(code), float(at)))

    def _line(self, timeout):
        """The zygote's next line; None when none came within `timeout` or
        the zygote is gone."""
        deadline = time.monotonic() + timeout
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if not select.select([fd], [], [], max(0.0, left))[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                self._gone = True
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()


def _exit_as_the_interpreter_would(code):
    """What a normal end of the interpreter does before it exits, in a
    forked rank: non-daemon threads joined, atexit handlers run, output
    flushed."""
    for t in threading.enumerate():
        if t is not threading.main_thread() and not t.daemon:
            t.join()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _become_rank(module, request, protocol):
    os.setsid()
    protocol.close()
    out = os.open(request["output"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    os.close(null)
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = list(request["argv"])
    # What multiprocessing's spawn children import, as for `python SCRIPT`.
    sys.modules["__main__"] = module
    code = 0
    try:
        module.main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    _exit_as_the_interpreter_would(code)


def _serve(script):
    # The protocol keeps stdout's pipe; what the imports print goes to stderr.
    protocol = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)

    def say(text):
        protocol.write(text.encode() + b"\n")

    sys.path.insert(0, os.path.dirname(script))
    name = os.path.splitext(os.path.basename(script))[0]
    spec = importlib.util.spec_from_file_location(name, script)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)

    threads = len(os.listdir("/proc/self/task"))  # native ones too
    if threads > 1:
        say("THREADED %d" % threads)
        return
    say("READY")
    stdin = sys.stdin.fileno()
    buffer = b""
    children = {}  # pid -> tag
    while True:
        readable = select.select([stdin], [], [], 0.05 if children else None)[0]
        for pid, tag in list(children.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                del children[pid]
                say("EXITED %s %d %d %f" % (tag, pid, _returncode(status), time.time()))
        if not readable:
            continue
        chunk = os.read(stdin, 65536)
        if not chunk:
            return
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            request = json.loads(line)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                try:
                    _become_rank(module, request, protocol)
                finally:
                    os._exit(1)
            children[pid] = request["tag"]
            say("STARTED %d" % pid)


if __name__ == "__main__":
    _serve(sys.argv[1])
