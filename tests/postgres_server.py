"""A real PostgreSQL server for the tests: initdb into a fresh directory, start, stop by pid.

``PostgresServer().start()`` runs the Debian PostgreSQL binaries found by
``/usr/lib/postgresql/*/bin/initdb`` (``scripts/setup.sh`` installs the ``postgresql`` package
when they are missing). The cluster lives in a new directory under ``/tmp`` with mode 0755 so
the ``postgres`` user can reach it; initdb and postgres refuse to run as root, so when the
tests run as root both are started as the ``postgres`` system user (``Popen(user=...)``, which
keeps the postmaster's pid as the pid we stop). Authentication is ``trust`` on 127.0.0.1 only,
and fsync is off: durability is not what these tests check.

``stop()`` sends SIGINT - PostgreSQL's "fast shutdown", which disconnects open sessions; its
SIGTERM ("smart shutdown") would wait for every client to leave - then SIGKILL if the server is
still there after a few seconds, and removes the directory.
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from oncelog.broker.process import free_port

SYSTEM_USER = "postgres"


def find_bin_dir() -> Path:
    """The newest installed PostgreSQL's ``bin`` directory."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                        key=lambda path: int(Path(path).parent.parent.name)
                        if Path(path).parent.parent.name.isdigit() else 0)
    if not candidates:
        raise RuntimeError("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb); "
                           "run scripts/setup.sh")
    return Path(candidates[-1]).parent


class PostgresServer:
    def __init__(self, *, host: str = "127.0.0.1", startup_timeout_s: float = 30.0) -> None:
        self.host = host
        self.startup_timeout_s = startup_timeout_s
        self.bin_dir = find_bin_dir()
        self.run_as = SYSTEM_USER if os.geteuid() == 0 else None
        self.base_dir: Path | None = None
        self.port: int | None = None
        self.process: subprocess.Popen | None = None
        self._database_numbers = itertools.count(1)

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def log_path(self) -> Path:
        return self.base_dir / "postgres.log"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@{self.host}:{self.port}/{database}"

    def start(self) -> PostgresServer:
        self.base_dir = Path(tempfile.mkdtemp(prefix="oncelog-pg-", dir="/tmp"))
        try:
            os.chmod(self.base_dir, 0o755)
            (self.base_dir / "socket").mkdir()
            if self.run_as:
                for path in (self.base_dir, self.base_dir / "socket"):
                    shutil.chown(path, self.run_as, self.run_as)
            self._initdb()
            for _attempt in range(3):  # the free port can be taken before postgres binds it
                if self._start_postmaster():
                    return self
            raise RuntimeError(f"postgres did not start; its log:\n{self.log_tail()}")
        except BaseException:
            self.stop()
            raise

    def _run_kwargs(self) -> dict:
        kwargs = {"cwd": self.base_dir, "stdin": subprocess.DEVNULL}
        if self.run_as:
            kwargs.update(user=self.run_as, group=self.run_as, extra_groups=[])
        return kwargs

    def _initdb(self) -> None:
        result = subprocess.run(
            [str(self.bin_dir / "initdb"), "-D", str(self.data_dir), "-A", "trust",
             "-U", "postgres", "-E", "UTF8", "--no-locale", "--no-sync"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **self._run_kwargs())
        if result.returncode != 0:
            raise RuntimeError(f"initdb failed with status {result.returncode}:\n"
                               f"{result.stdout.decode(errors='replace')}")

    def _start_postmaster(self) -> bool:
        """Start postgres on a fresh port; False if it exited before accepting connections."""
        self.port = free_port(self.host)
        log = open(self.log_path, "ab")
        try:
            self.process = subprocess.Popen(
                [str(self.bin_dir / "postgres"), "-D", str(self.data_dir), "-p", str(self.port),
                 "-k", str(self.base_dir / "socket"), "-c", f"listen_addresses={self.host}",
                 "-c", "fsync=off", "-c", "synchronous_commit=off",
                 "-c", "full_page_writes=off", "-c", "max_connections=50"],
                stdout=log, stderr=subprocess.STDOUT, **self._run_kwargs())
        finally:
            log.close()
        return self._wait_ready()

    def _wait_ready(self) -> bool:
        import psycopg

        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                psycopg.connect(self.url(), connect_timeout=2).close()
                return True
            except psycopg.OperationalError:
                time.sleep(0.1)
        raise RuntimeError(f"postgres did not accept connections on {self.host}:{self.port} "
                           f"within {self.startup_timeout_s} s; its log:\n{self.log_tail()}")

    def create_database(self, name: str | None = None) -> str:
        """Create an empty database and return its URL."""
        import psycopg

        name = name or f"test_{next(self._database_numbers)}"
        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def owner_with_password(self, database_url: str, role: str, password: str) -> str:
        """Make ``role`` (created, with ``password``) the owner of the database at
        ``database_url`` and return a URL that logs in as it. The role alone authenticates
        with scram-sha-256 (a pg_hba.conf line ahead of ``trust``): a wrong or missing
        password is refused."""
        import psycopg
        from psycopg import sql

        hba = self.data_dir / "pg_hba.conf"
        line = f"host all {role} {self.host}/32 scram-sha-256\n"
        if line not in hba.read_text():
            hba.write_text(line + hba.read_text())
        database = database_url.rsplit("/", 1)[1]
        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(password)))
            connection.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(
                sql.Identifier(database), sql.Identifier(role)))
            connection.execute("SELECT pg_reload_conf()")
        return f"postgresql://{role}:{quote(password, safe='')}@{self.host}:{self.port}/{database}"

    def drop_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except (OSError, TypeError):
            return ""

    def stop(self, timeout_s: float = 10.0) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)  # fast shutdown
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self.base_dir is not None:
            shutil.rmtree(self.base_dir, ignore_errors=True)
            self.base_dir = None

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
