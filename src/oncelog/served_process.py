"""What the server processes oncelog starts for its tools and tests have in common (ZooKeeper,
the Spark Connect server): waiting until one serves, the tail of its log, ``with`` blocks;
``free_port()``, a loopback port nobody listens on now, for any server oncelog starts; and
``listens_itself(pid, port)``, so that a server that lost its port to another process is not
taken for ready because the other one answers.

**Ports below the kernel's ephemeral range.** ``free_port()`` does not let the kernel choose
(``bind(0)``): the kernel chooses from its ephemeral range (``ip_local_port_range``), the
range every listener that binds port 0 gets its port from too - Spark's Python-worker and
Py4J sockets, a JVM's RMI. A Kafka client goes on reconnecting to a broker that was stopped,
so a port a stopped server had in that range could be given to such a listener, which then
reads the client's ApiVersions request where it waits for its own worker's secret (Spark
fails the query: "Python worker failed to connect back", "Authentication failed"; a clean-clone
CI run did, 2026-11-30). So servers take ports below the ephemeral range, each process walking
that range from a random place, so that it does not give one port out again soon either.

**Dying with the process that started them.** ``tied_to_this_process(argv)`` is the command
to start instead of ``argv`` so that the child is killed (SIGKILL) when this process dies, even
by ``kill -9``: a broker left running would hold its data directory, and ZooKeeper its port,
against the next run. Linux's parent-death signal (``prctl(PR_SET_PDEATHSIG)``) is set in the
child before it execs the real command, by a few lines of Python run as ``python -I -S -c``;
not with ``preexec_fn``, which Python documents as unsafe in a process with threads (the
pipeline's order generator, Py4J's, a proxy's). Two limits, both the kernel's:

- The signal is tied to the *thread* that started the child, not to the process: if that
  thread ends, the child is killed although this process lives on. So a child is tied only
  when started from the main thread; one started from another thread (a test's helper thread
  restarting a broker) is not, and is stopped by pid like before.
- Not on other systems than Linux: there the command is returned as it is.

A class that mixes ``ServedProcess`` in has ``process`` (its ``subprocess.Popen`` or None),
``log_path``, ``address`` (``host:port``, for messages), ``is_serving()``, ``start()`` and
``stop()``, and sets ``NAME`` (how messages call it), ``START_ERROR`` (the exception a start
that failed raises) and ``READY_POLL_S`` (how often to ask it whether it serves).
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Self

# Run by ``python -I -S -c`` (only the standard library, no site: a few milliseconds) with
# argv: the parent's pid, the signal, the command. PR_SET_PDEATHSIG is option 1; the check
# after it covers a parent that died before the signal was set. The signal survives execve.
_TIE_AND_EXEC = """\
import ctypes, os, sys
parent, signum, command = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signum, 0, 0, 0)
except (OSError, AttributeError):
    pass
if os.getppid() != parent:
    os._exit(1)
try:
    os.execvp(command[0], command)
except OSError as error:
    sys.stderr.write(f"cannot run {command[0]}: {error.strerror}\\n")
    os._exit(127)
"""


def tied_to_this_process(argv: list[str], signum: int = signal.SIGKILL) -> list[str]:
    """``argv`` started so that the kernel sends ``signum`` to it when the thread starting it
    (the main thread) ends: see the module docstring."""
    if not sys.platform.startswith("linux") or \
            threading.current_thread() is not threading.main_thread():
        return list(argv)
    return [sys.executable, "-I", "-S", "-c", _TIE_AND_EXEC, str(os.getpid()),
            str(int(signum)), *argv]


# Where servers' ports are taken from: up to the ephemeral range's start (see the module
# docstring), from this low; where the range cannot be read (not Linux), the kernel chooses.
SERVER_PORTS_FROM = 10000
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_next_port: list[int] = []  # this process's place in the walk; empty until the first call
_next_port_lock = threading.Lock()
# A forked child (multiprocessing's clients) starts its own walk, not its parent's.
os.register_at_fork(after_in_child=_next_port.clear)


def server_ports() -> range | None:
    """The ports ``free_port()`` gives out: from ``SERVER_PORTS_FROM`` to the start of the
    kernel's ephemeral range; None where that range cannot be read or leaves too few."""
    try:
        ephemeral_from = int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    ports = range(SERVER_PORTS_FROM, ephemeral_from)
    return ports if len(ports) >= 1000 else None


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody has bound now, below the kernel's ephemeral range (module docstring);
    free now, not reserved (a server that then fails to bind it retries with another;
    ``BrokerProcess.start`` does)."""
    ports = server_ports()
    if ports is not None:
        with _next_port_lock:
            if not _next_port:
                _next_port.append(random.SystemRandom().randrange(len(ports)))
            for _ in range(len(ports)):
                port = ports[_next_port[0] % len(ports)]
                _next_port[0] += 1
                with socket.socket() as probe:
                    try:
                        probe.bind((host, port))
                    except OSError:
                        continue
                    return port
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def listens_itself(pid: int, port: int) -> bool | None:
    """Whether process ``pid`` holds a listening TCP socket on ``port`` (in its own network
    namespace); None where /proc cannot tell (not Linux)."""
    if not os.path.exists("/proc/net/tcp"):
        return None
    inodes: set[str] = set()
    # The tables of ``pid``'s own network namespace: a server started inside another one
    # (``ip netns exec``) listens where /proc/net/tcp, this process's view, does not look.
    for table in (f"/proc/{pid}/net/tcp", f"/proc/{pid}/net/tcp6"):  # tcp6: not without IPv6
        try:
            with open(table) as lines:
                next(lines)
                for line in lines:
                    fields = line.split()
                    if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        inodes.add(fields[9])
        except FileNotFoundError:
            continue
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:  # the process is gone
        return False
    for descriptor in descriptors:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{descriptor}")
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            return True
    return False


class ServedProcess:
    NAME = "the server"
    START_ERROR: type[Exception] = RuntimeError
    READY_POLL_S = 0.1

    if TYPE_CHECKING:  # what each server's class provides
        log_path: Path

        @property
        def process(self) -> subprocess.Popen[bytes] | None: ...

        @property
        def address(self) -> str: ...

        def is_serving(self) -> bool: ...

        def start(self) -> Self: ...

        def stop(self) -> object: ...

    def wait_ready(self, timeout_s: float) -> bool:
        """True once the server serves; False if it exited first; ``START_ERROR`` if it does
        neither within ``timeout_s``."""
        process = self.process
        assert process is not None, "wait_ready after start"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if process.poll() is not None:
                return False
            if self.is_serving():
                return True
            time.sleep(self.READY_POLL_S)
        raise self.START_ERROR(f"{self.NAME} did not answer on {self.address} within "
                               f"{timeout_s:g} s; see {self.log_path}")

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
