"""What the server processes oncelog starts for its tools and tests have in common (ZooKeeper,
the Spark Connect server): waiting until one serves, the tail of its log, ``with`` blocks.

A class that mixes ``ServedProcess`` in has ``process`` (its ``subprocess.Popen`` or None),
``log_path``, ``address`` (``host:port``, for messages), ``is_serving()``, ``start()`` and
``stop()``, and sets ``NAME`` (how messages call it), ``START_ERROR`` (the exception a start
that failed raises) and ``READY_POLL_S`` (how often to ask it whether it serves).
"""

from __future__ import annotations

import time


class ServedProcess:
    NAME = "the server"
    START_ERROR: type[Exception] = RuntimeError
    READY_POLL_S = 0.1

    def wait_ready(self, timeout_s: float) -> bool:
        """True once the server serves; False if it exited first; ``START_ERROR`` if it does
        neither within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
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

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
