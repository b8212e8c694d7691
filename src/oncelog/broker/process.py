"""Run a broker as a child process: used by ``oncelog demo``, the tests and the benchmarks.

``BrokerProcess`` starts ``python -m oncelog broker`` on a free loopback port, waits until it
accepts connections, and stops it by process id - gracefully (SIGTERM), or with ``kill -9``
for crash tests. It is a context manager, so a failing caller still stops its broker.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


class BrokerProcess:
    def __init__(self, data_dir: Path, *, port: int | None = None, host: str = "127.0.0.1",
                 settings: dict[str, str] | None = None, log_path: Path | None = None,
                 extra_args: list[str] | None = None, env: dict[str, str] | None = None
                 ) -> None:
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port or free_port(host)
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
        args = [sys.executable, "-m", "oncelog", "broker", "--listen", self.bootstrap,
                "--data-dir", str(self.data_dir)]
        for name, value in self.settings.items():
            args += ["--set", f"{name}={value}"]
        return args + self.extra_args

    def start(self, timeout: float = 20.0) -> "BrokerProcess":
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL,
                                        env={**os.environ, **self.env} if self.env else None)
        log.close()
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"broker exited with status {self.process.returncode}; "
                                   f"see {self.log_path}:\n{self.log_tail()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"broker did not listen on {self.bootstrap} within {timeout} s")

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

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

    def restart(self, *, hard: bool = False) -> "BrokerProcess":
        self.kill() if hard else self.stop()
        return self.start()

    def __enter__(self) -> "BrokerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
