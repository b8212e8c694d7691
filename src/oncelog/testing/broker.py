"""A real oncelog broker for a user's tests, with process and wire faults.

``with broker() as b:`` starts ``python -m oncelog broker`` on a free loopback port (about a
second), puts a ``WireProxy`` in front of it and gives ``b.bootstrap`` - the proxy's
address, so wire faults (``b.fail_next(...)``, ``b.drop_response(...)``, ...) can be armed
at any moment without the client reconnecting. ``b.direct_bootstrap`` is the broker itself.

Process faults: ``kill()`` (SIGKILL), ``restart()`` (same port and data directory, so acknowledged
records are still there), ``pause()``/``resume()`` (SIGSTOP/SIGCONT). ``reset()`` puts a
broker back the way a new test expects it: faults cleared, resumed, running.

``topic(prefix, partitions=...)`` creates a topic with a unique name and returns the name;
``group(prefix)`` returns a unique group id. Names are unique per call, so tests sharing one
broker never see each other's records.

``security="SSL"|"SASL_SSL"|"SASL_PLAINTEXT"`` starts it on that listener alone: a
``CertificateAuthority`` made for it (``b.ca_file``, the authority a client trusts), a user
``b.username``/``b.password`` with SCRAM-SHA-512 and SCRAM-SHA-256 credentials (PLAIN also
served). ``b.client_config()`` is a confluent-kafka configuration that connects,
``b.kafka_python_config()`` kafka-python's keyword arguments, ``b.command_config`` a
``--command-config`` file for the ``oncelog`` commands. A TLS listener has no wire-fault
proxy in front (``bootstrap`` is the broker's own address): the proxy reads Kafka frames,
which TLS hides; a SASL_PLAINTEXT one keeps it.

Safety: every broker process the kit starts is recorded by pid and killed at interpreter
exit (``atexit``) if nothing stopped it before, paused ones resumed first; ``close()`` (the
context manager's exit) stops it gracefully, then by SIGKILL.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..broker.process import BrokerProcess

if TYPE_CHECKING:  # imported when a broker starts: importing this module stays cheap
    from .wire import WireFault, WireFaults, WireProxy

__all__ = ["Broker", "FAST_SETTINGS", "broker", "live_pids", "unique_name"]

# Defaults that make a test broker fast to use: no rebalance wait, small internal topics.
FAST_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
}

# pid -> the process object: a BrokerProcess, ZooKeeperProcess, SparkDriver, ... (each has
# ``pid`` and ``process``)
_live: dict[int, Any] = {}
_live_lock = threading.Lock()


def _track(process: Any) -> None:
    with _live_lock:
        _live[process.pid] = process


def _untrack(pid: int | None) -> None:
    with _live_lock:
        if pid is not None:
            _live.pop(pid, None)


def live_pids() -> list[int]:
    """Pids of processes the kit started and has not seen stop (for teardown checks)."""
    with _live_lock:
        return [pid for pid, process in _live.items() if process.process.poll() is None]


@atexit.register
def _kill_leftovers() -> None:
    """Interpreter exit (an interrupted run, a test that never reached its teardown): kill
    every process the kit started, by pid."""
    with _live_lock:
        leftovers = list(_live.values())
        _live.clear()
    for process in leftovers:
        if hasattr(process, "kill_at_exit"):
            process.kill_at_exit()  # e.g. a SparkDriver: its whole process group
            continue
        if process.process is not None and process.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGCONT)
                os.kill(process.pid, signal.SIGKILL)
            process.process.wait()


def unique_name(prefix: str = "test") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def wait_until_in_sync(admin: Any, name: str, partitions: int, replicas: int,
                       timeout_s: float) -> str:
    """Until every partition of topic ``name`` has a leader and ``replicas`` replicas in its
    ISR, as ``admin`` (a confluent-kafka AdminClient) reads it; returns ``name``, or raises
    TimeoutError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        described = admin.list_topics(name, timeout=5).topics.get(name)
        if described is not None and described.error is None \
                and len(described.partitions) == partitions and all(
                    p.leader >= 0 and len(p.isrs) == replicas
                    for p in described.partitions.values()):
            return name
        time.sleep(0.1)
    raise TimeoutError(f"topic {name}: replicas not all in sync within {timeout_s:g} s")


class _WireFaultMethods:
    """The wire-fault controls, for anything that has a ``faults: WireFaults``."""

    faults: WireFaults

    def _armable(self) -> WireFaults:
        """Where a wire fault is armed (a broker without a proxy that could play it says so)."""
        return self.faults

    def fail_next(self, api: str = "Produce", error: str = "NOT_LEADER_OR_FOLLOWER",
                  count: int | None = 1, topic: str | None = None,
                  partition: int | None = None) -> WireFault:
        return self._armable().fail_next(api, error, count, topic, partition)

    def drop_response(self, api: str = "Produce", count: int | None = 1) -> WireFault:
        return self._armable().drop_response(api, count)

    def delay(self, api: str | None = None, ms: float = 100.0,
              count: int | None = None) -> WireFault:
        return self._armable().delay(api, ms, count)

    def disconnect_on(self, api: str, count: int | None = 1) -> WireFault:
        return self._armable().disconnect_on(api, count)

    def blackhole(self, client_id: str) -> WireFault:
        return self._armable().blackhole(client_id)

    def clear_faults(self) -> None:
        self.faults.clear()


SECURITY_PROTOCOLS = ("SSL", "SASL_SSL", "SASL_PLAINTEXT")
# The user of a broker started with SASL; its password is made per broker.
TEST_USER = "oncelog-test"
TEST_MECHANISM = "SCRAM-SHA-512"


class Broker(_WireFaultMethods):
    def __init__(self, data_dir: Path | None = None, *, settings: dict[str, str] | None = None,
                 wire_faults: bool = True, security: str | None = None) -> None:
        if security is not None and security.upper() == "PLAINTEXT":
            security = None
        if security is not None and security.upper() not in SECURITY_PROTOCOLS:
            raise ValueError(f"security must be one of {', '.join(SECURITY_PROTOCOLS)}, "
                             f"not {security!r}")
        self._own_dir = data_dir is None
        self.directory = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(
            prefix="oncelog-test-broker-"))
        self.security_protocol = security.upper() if security else "PLAINTEXT"
        self.ca_file: Path | None = None
        self.username: str | None = None
        self.password: str | None = None
        self.command_config: Path | None = None
        listener: dict[str, str] = {}
        if security is not None:
            listener = self._secure(self.security_protocol)
            if self.security_protocol != "SASL_PLAINTEXT":
                wire_faults = False  # the proxy reads frames, which TLS hides
        merged = {**FAST_SETTINGS, **listener, **(settings or {})}
        self.process = (
            _SecureBrokerProcess(self.security_protocol, self.directory / "data",
                                 settings=merged, log_path=self.directory / "broker.log")
            if listener else
            BrokerProcess(self.directory / "data", settings=merged,
                          log_path=self.directory / "broker.log"))
        from .wire import WireFaults
        self.faults = WireFaults()
        self._wire_faults = wire_faults
        self.proxy: WireProxy | None = None
        self._admin = None
        self.paused = False

    def _armable(self) -> WireFaults:
        if self.security_protocol in ("SSL", "SASL_SSL"):
            raise RuntimeError(f"wire faults need the kit's fault proxy, which reads Kafka's "
                               f"frames; this broker's {self.security_protocol} listener "
                               "encrypts them, so it has none (process faults work: kill, "
                               "restart, pause)")
        return self.faults

    def _secure(self, protocol: str) -> dict[str, str]:
        """The broker's settings for a ``protocol`` listener; makes the authority, the
        broker's certificate and the user it needs."""
        import secrets

        from .certificates import CertificateAuthority
        settings = {"inter.broker.listener.name": protocol}
        if protocol in ("SSL", "SASL_SSL"):
            ca = CertificateAuthority(self.directory / "tls")
            self.ca_file = ca.certificate
            settings["ssl.keystore.location"] = str(ca.issue("broker").keystore)
        if protocol.startswith("SASL"):
            from ..controller.metadata_store import LocalMetadataStore
            from ..security.scram import ScramCredential
            self.username, self.password = TEST_USER, secrets.token_urlsafe(12)
            store = LocalMetadataStore(self.directory / "data")
            try:
                for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
                    store.alter_scram_credential(self.username, mechanism, ScramCredential
                                                 .from_password(mechanism, self.password)
                                                 .to_text())
            finally:
                store.close()
            settings["sasl.enabled.mechanisms"] = "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN"
        self.command_config = self.directory / "client.properties"
        self.command_config.touch(mode=0o600)
        self.command_config.write_text("".join(
            f"{name}={value}\n" for name, value in self.client_settings().items()))
        return settings

    def client_settings(self) -> dict[str, str]:
        """librdkafka's security settings for this broker (``{}`` for PLAINTEXT)."""
        if self.security_protocol == "PLAINTEXT":
            return {}
        settings = {"security.protocol": self.security_protocol}
        if self.ca_file is not None:
            settings["ssl.ca.location"] = str(self.ca_file)
        if self.username is not None and self.password is not None:
            settings.update({"sasl.mechanism": TEST_MECHANISM, "sasl.username": self.username,
                             "sasl.password": self.password})
        return settings

    def client_config(self, settings: dict[str, Any] | None = None) -> dict[str, Any]:
        """A confluent-kafka configuration that connects: ``bootstrap.servers``, the security
        settings, then ``settings`` (``client_config({"group.id": "g"})``)."""
        return {"bootstrap.servers": self.bootstrap, **self.client_settings(),
                **(settings or {})}

    def kafka_python_config(self, **settings: Any) -> dict[str, Any]:
        """kafka-python's keyword arguments that connect (``bootstrap_servers`` and the
        security ones), then ``settings``."""
        from ..client.security import kafka_python_settings
        return {"bootstrap_servers": self.bootstrap,
                **kafka_python_settings(self.client_settings()), **settings}

    # -- addresses and life cycle ----------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """Where clients connect: the fault proxy (or the broker without ``wire_faults``)."""
        return self.proxy.bootstrap if self.proxy else self.process.bootstrap

    @property
    def direct_bootstrap(self) -> str:
        return self.process.bootstrap

    @property
    def pid(self) -> int | None:
        return self.process.pid

    @property
    def log_path(self) -> Path:
        return self.process.log_path

    def is_running(self) -> bool:
        return self.process.process is not None and self.process.process.poll() is None

    def start(self, timeout_s: float = 20.0) -> Broker:
        try:
            self._start_process(timeout_s)
            if self._wire_faults:
                from .wire import WireProxy
                self.proxy = WireProxy(self.process.bootstrap, faults=self.faults).start()
        except BaseException:
            self.close()
            raise
        return self

    def _start_process(self, timeout_s: float) -> None:
        try:
            self.process.start(timeout_s)
        finally:
            if self.process.process is not None:
                _track(self.process)

    def close(self) -> None:
        """Stop the proxy and the broker (SIGTERM, then SIGKILL), and remove a data directory
        the kit made."""
        self._admin = None
        if self.proxy is not None:
            self.proxy.stop()
        if self.is_running():
            self.resume()
            self.process.stop(timeout=10)
        _untrack(self.pid)
        if self._own_dir:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- process faults --------------------------------------------------------------------

    def kill(self) -> None:
        """kill -9 the broker. Acknowledged records survive a ``restart()``."""
        if self.paused:
            self.resume()
        self.process.kill()

    def restart(self, *, hard: bool = False, timeout_s: float = 20.0) -> None:
        """Stop (SIGTERM, or SIGKILL with ``hard``) if running, then start on the same port
        and data directory; the proxy in front stays, so ``bootstrap`` does not change."""
        if self.is_running():
            if hard:
                self.kill()
            else:
                self.resume()
                self.process.stop()
        _untrack(self.pid)
        self._admin = None
        self._start_process(timeout_s)

    def pause(self) -> None:
        """SIGSTOP: the broker holds its connections but answers nothing (a GC pause, a
        stalled disk)."""
        pid = self.pid
        assert pid is not None, "pause a started broker"
        os.kill(pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        pid = self.pid
        if self.paused and self.is_running() and pid is not None:
            os.kill(pid, signal.SIGCONT)
        self.paused = False

    def reset(self) -> None:
        """Back to a healthy broker for the next test: faults cleared, resumed, running."""
        self.clear_faults()
        self.resume()
        if not self.is_running():
            self.restart()

    # -- names -----------------------------------------------------------------------------

    def admin(self):
        """A cached AdminClient talking to the broker directly (never through faults)."""
        if self._admin is None:
            from confluent_kafka.admin import AdminClient
            self._admin = AdminClient({"bootstrap.servers": self.direct_bootstrap,
                                       **self.client_settings(), "log_level": 0})
        return self._admin

    def topic(self, prefix: str = "test", partitions: int = 1,
              config: dict[str, str] | None = None, timeout_s: float = 10.0) -> str:
        """Create a topic named ``<prefix>-<random>`` and return its name."""
        from confluent_kafka.admin import NewTopic
        name = unique_name(prefix)
        futures = self.admin().create_topics(
            [NewTopic(name, partitions, 1, config=dict(config or {}))],
            operation_timeout=timeout_s)
        futures[name].result(timeout_s)
        return name

    def group(self, prefix: str = "group") -> str:
        return unique_name(prefix)

    def read_all(self, topic: str, *, isolation: str = "read_committed",
                 timeout_s: float = 10.0) -> list:
        """Every record of ``topic`` now, read from the broker directly (not through faults);
        see ``oncelog.testing.assertions.read_all``."""
        from .assertions import read_all
        return read_all(self.direct_bootstrap, topic, isolation=isolation, timeout_s=timeout_s,
                        config=self.client_settings())


class _SecureBrokerProcess(BrokerProcess):
    """A broker whose one listener is named by its security protocol, at the port this
    start uses (a port found taken is replaced by another before the next start)."""

    def __init__(self, protocol: str, data_dir: Path, **options: Any) -> None:
        super().__init__(data_dir, **options)
        self.protocol = protocol

    def command(self) -> list[str]:
        self.settings["listeners"] = f"{self.protocol}://{self.host}:{self.port}"
        return super().command()


@contextlib.contextmanager
def broker(data_dir: Path | str | None = None, *, settings: dict[str, str] | None = None,
           wire_faults: bool = True, security: str | None = None) -> Iterator[Broker]:
    """A running broker (and fault proxy) for the ``with`` block; stopped by pid after it.

    ``settings`` are Kafka config names (``{"num.partitions": "3"}``); ``data_dir`` keeps
    the data where you say (default: a temporary directory, removed afterwards);
    ``security`` (``"SSL"``, ``"SASL_SSL"``, ``"SASL_PLAINTEXT"``) secures its listener
    (``client_config()`` then connects).
    """
    started = Broker(Path(data_dir) if data_dir else None, settings=settings,
                     wire_faults=wire_faults, security=security)
    started.start()
    try:
        yield started
    finally:
        started.close()
