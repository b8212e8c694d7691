"""Run a broker as a child process: used by ``oncelog demo``, the tests and the benchmarks.

``BrokerProcess`` starts ``python -m oncelog broker`` on a free loopback port, waits until it
accepts connections, and stops it by process id - gracefully (SIGTERM), or with ``kill -9``
for crash tests. It is a context manager, so a failing caller still stops its broker; and a
caller that dies without stopping it (``kill -9``) takes it along: the broker is started tied
to the caller (``served_process.tied_to_this_process``: Linux's parent-death signal, when
started from the main thread).

A free port is only free when it is probed: on a busy machine another process (a broker of a
parallel test, a client's outgoing connection) may take it before the broker binds it. So the
broker is ready only once *its own* process listens there (on Linux: the listening socket's
inode is among the process's descriptors), not when anything answers on the port; and a broker
whose port was chosen here and then taken is started again on another free port.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from ..served_process import (free_port, listens_itself,  # tests import both from here too
                              tied_to_this_process)

PORT_ATTEMPTS = 5
PORT_TAKEN = "address already in use"  # in the broker's "cannot listen on ..." line


class BrokerExited(RuntimeError):
    """The broker process ended before it was ready.

    ``summary`` is one clause for a sentence - ``exited with status 1: cannot listen on
    127.0.0.1:9092: ... address already in use; see .../broker.log`` - with the broker's own
    last error line (``exit_reason``); the message adds the log's tail on the lines after."""

    def __init__(self, status: int | None, log_path: Path, reason: str, tail: str) -> None:
        self.status = status
        self.log_path = log_path
        self.reason = reason
        self.summary = (f"exited with status {status}: {reason or 'its log says nothing'}; "
                        f"see {log_path}")
        super().__init__(f"broker {self.summary}\n{tail}")


def exit_reason(log_text: str) -> str:
    """The line of a broker's log that says why it stopped: its last one-sentence error
    (``oncelog: ...``, without the prefix), else its last ERROR or CRITICAL record (the
    message only), else its last line."""
    lines = [line.strip() for line in log_text.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("oncelog: "):
            return line[len("oncelog: "):]
    for line in reversed(lines):
        # "%(asctime)s %(levelname)s %(name)s: %(message)s", as ``oncelog broker`` logs
        fields = line.split(" ", 4)
        if len(fields) == 5 and fields[2] in ("ERROR", "CRITICAL"):
            return fields[4].split(": ", 1)[-1]
    return lines[-1] if lines else ""


class BrokerProcess:
    def __init__(self, data_dir: Path, *, port: int | None = None, host: str = "127.0.0.1",
                 settings: dict[str, str] | None = None, log_path: Path | None = None,
                 extra_args: list[str] | None = None, env: dict[str, str] | None = None,
                 command_prefix: list[str] | None = None,
                 security_protocol: str = "PLAINTEXT") -> None:
        self.data_dir = Path(data_dir)
        # the one listener's protocol (named after it, as Kafka's default names it)
        self.security_protocol = security_protocol
        self.host = host
        self.port = port or free_port(host)
        self._port_chosen_here = port is None
        # put before the broker's command: ``ip netns exec NS`` runs it in a network
        # namespace of its own (``cluster.isolation``)
        self.command_prefix = list(command_prefix or [])
        self.settings = dict(settings or {})
        self.log_path = log_path or self.data_dir.parent / f"broker-{self.port}.log"
        self.extra_args = list(extra_args or [])
        self.env = dict(env or {})  # added to this process's environment
        self.process: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def command(self) -> list[str]:
        # ``listeners`` among the settings (several, named) replaces --listen; the first
        # of them is expected at ``host:port``
        listen = [] if "listeners" in self.settings else ["--listen", self.bootstrap] \
            if self.security_protocol == "PLAINTEXT" else \
            ["--set", f"listeners={self.security_protocol}://{self.bootstrap}"]
        args = [*self.command_prefix, sys.executable, "-m", "oncelog", "broker", *listen,
                "--data-dir", str(self.data_dir)]
        for name, value in self.settings.items():
            args += ["--set", f"{name}={value}"]
        return args + self.extra_args

    def start(self, timeout: float = 20.0) -> BrokerProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        attempts_left = PORT_ATTEMPTS if self._port_chosen_here else 1
        while True:
            log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
            self._spawn()
            try:
                self.wait_ready(timeout, log_start)
                return self
            except BrokerExited:
                attempts_left -= 1
                if not attempts_left or PORT_TAKEN not in self.log_text(log_start).lower():
                    raise
            self.port = free_port(self.host)

    def _spawn(self) -> None:
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(tied_to_this_process(self.command()), stdout=log,
                                        stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL,
                                        env={**os.environ, **self.env} if self.env else None)
        log.close()

    def wait_ready(self, timeout: float, log_start: int = 0) -> None:
        process = self.process
        assert process is not None, "wait_ready after start"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise BrokerExited(process.returncode, self.log_path,
                                   exit_reason(self.log_text(log_start)), self.log_tail())
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    pass
            except OSError:
                time.sleep(0.05)
                continue
            if listens_itself(process.pid, self.port) is not False:
                return
            time.sleep(0.05)  # someone else answers on our port; we will fail to bind it
        self.kill()
        raise RuntimeError(f"broker did not listen on {self.bootstrap} within {timeout} s")

    def log_text(self, since: int = 0) -> str:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(since)
                return log.read().decode(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM and wait; SIGKILL if it does not stop in time. Returns the exit status."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.process.returncode

    def kill(self) -> None:
        """kill -9: the crash the durability guarantees are about."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def restart(self, *, hard: bool = False) -> BrokerProcess:
        self.kill() if hard else self.stop()
        return self.start()

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
