"""The newcomer tier's set-up: the repository as a newcomer gets it, an empty folder to work
in, and every process a command starts stopped by pid at teardown.

- ``repo_copy`` (session): the working tree (``git ls-files``: tracked files and new ones
  not ignored, as they are on disk now, so uncommitted changes are tested too) copied into a
  temporary folder. A copy rather than a ``git clone``: a clone holds only commits, and the
  point is to test what is about to be committed; what a clone adds (nothing ignored, no
  ``.venv``, no egg-info) the copy has too, because it is made from the same file list.
- ``newcomer_venv`` (session): a fresh virtualenv with ``pip install <copy> pytest`` - what
  docs/testing.md's set-up says (``pip install oncelog``), plus the pytest a user already
  has, at the project's pin. pip's own cache makes it take seconds after the first time.
  Its ``oncelog`` and ``pytest`` are the commands the tests type.
- ``user`` (test): an empty folder and ``user.run(...)`` / ``user.start(...)``, which run a
  command there as a user would - the fresh virtualenv first on ``PATH``, none of this
  test run's ``PYTHONPATH`` or pytest variables - each in a session of its own.

Teardown kills every process a test started and every process still running from its folder
(by cwd or by a path of it on its command line: a broker a killed command left behind, with
parent 1), by pid, whatever the test's outcome.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from tests.process_tree import descendants, running

ROOT = Path(__file__).resolve().parents[2]

# Variables of this test run that a newcomer's shell does not have: they would make the
# fresh virtualenv import this checkout (PYTHONPATH), or make pytest think it is a worker.
_NOT_A_USERS = ("PYTHONPATH", "VIRTUAL_ENV", "PYTEST_ADDOPTS", "PYTEST_PLUGINS",
                "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_CURRENT_TEST", "PYTEST_XDIST_WORKER",
                "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID", "PYTHONWARNINGS",
                "COV_CORE_SOURCE", "COV_CORE_CONFIG", "COV_CORE_DATAFILE")


def _tracked_and_new_files(root: Path) -> list[str]:
    try:
        listing = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                                  "--exclude-standard"], cwd=root, capture_output=True,
                                 check=True).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        pytest.fail(f"the newcomer tier copies the repository's files as git lists them, and "
                    f"git could not list them in {root}: {error}")
    return [name for name in listing.decode().split("\0") if name]


@pytest.fixture(scope="session")
def repo_copy(tmp_path_factory) -> Path:
    copy = tmp_path_factory.mktemp("newcomer") / "oncelog"
    for name in _tracked_and_new_files(ROOT):
        source = ROOT / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree, not yet committed
        target = copy / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
    return copy


def _pin(copy: Path, extra: str, package: str) -> str:
    project = tomllib.loads((copy / "pyproject.toml").read_text())["project"]
    for requirement in project["optional-dependencies"][extra]:
        if requirement.split("==")[0].strip() == package:
            return requirement
    raise AssertionError(f"pyproject.toml's {extra} extra has no pin for {package}")


def user_environment(venv: Path | None) -> dict[str, str]:
    environment = {name: value for name, value in os.environ.items()
                   if name not in _NOT_A_USERS}
    # This test run's own virtualenv leaves PATH too: the newcomer has only the fresh one.
    ours = str(Path(sys.executable).parent)
    path = [entry for entry in environment.get("PATH", "").split(os.pathsep) if entry != ours]
    if venv is not None:
        path.insert(0, str(venv / "bin"))
    environment["PATH"] = os.pathsep.join(path)
    return environment


@pytest.fixture(scope="session")
def newcomer_venv(repo_copy, tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("newcomer-venv") / "venv"
    environment = user_environment(None)
    subprocess.run([sys._base_executable, "-m", "venv", str(venv)], check=True,
                   env=environment, timeout=300)
    installed = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
         str(repo_copy), _pin(repo_copy, "test", "pytest")],
        capture_output=True, text=True, env=environment, timeout=900)
    assert installed.returncode == 0, f"pip install of the copy failed:\n{installed.stderr}"
    return venv


def processes_from(folder: Path) -> list[int]:
    """Live processes working in ``folder`` or naming a path inside it on their command line
    (this test process and its ancestors excepted)."""
    mine = {os.getpid(), os.getppid()}
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in mine:
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if (cwd == str(folder) or cwd.startswith(f"{folder}/") or str(folder) in command) \
                and running(int(entry)):
            found.append(int(entry))
    return found


def describe(pids: list[int]) -> str:
    lines = []
    for pid in pids:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            command = "(gone)"
        lines.append(f"pid {pid}: {command[:200]}")
    return "\n".join(lines)


def kill_pids(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class User:
    """A newcomer at a shell in an empty folder, with the fresh virtualenv on ``PATH``."""

    def __init__(self, folder: Path, venv: Path | None) -> None:
        self.folder = folder
        self.environment = user_environment(venv)
        self.started: list[subprocess.Popen] = []

    def start(self, command: str, output: Path | None = None) -> subprocess.Popen:
        """One command as typed at a shell, left running in a session of its own (the shell
        ``exec``s it, so its pid and exit status are the command's); its output to the file
        ``output`` (a server would fill a pipe nobody reads) or to pipes."""
        if output is None:
            return self._popen(f"exec {command}", {}, {})
        with open(output, "w") as file:  # the child keeps its own copy of the descriptor
            return self._popen(f"exec {command}",
                               {"stdout": file, "stderr": subprocess.STDOUT}, {})

    def _popen(self, command: str, streams: dict, kwargs: dict) -> subprocess.Popen:
        streams = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **streams}
        process = subprocess.Popen(command, shell=True, cwd=self.folder, env=self.environment,
                                   text=True, start_new_session=True, **streams, **kwargs)
        self.started.append(process)
        return process

    def run(self, command: str, timeout: float = 120, stdin: str | None = None
            ) -> subprocess.CompletedProcess:
        """A command line as typed at a shell (pipes and all), run to its end."""
        process = self._popen(command, {}, {"stdin": subprocess.PIPE if stdin is not None
                                            else subprocess.DEVNULL})
        try:
            stdout, stderr = process.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop(process)
            stdout, stderr = process.communicate()
            raise AssertionError(f"{command!r} did not finish in {timeout:g} s\n--- stdout ---\n"
                                 f"{stdout[-3000:]}\n--- stderr ---\n{stderr[-3000:]}") from None
        return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)

    def interrupt(self, process: subprocess.Popen) -> None:
        """Ctrl-C: SIGINT to the command's process group, as a terminal sends it."""
        os.killpg(process.pid, signal.SIGINT)

    def stop(self, process: subprocess.Popen) -> None:
        """SIGKILL to the command and everything below it, by pid."""
        kill_pids([*descendants(process.pid), process.pid])
        process.wait(30)

    def leftovers(self, settle_s: float = 10.0) -> list[int]:
        """Processes still running from this folder, after up to ``settle_s`` for them to exit."""
        deadline = time.monotonic() + settle_s
        while (pids := processes_from(self.folder)) and time.monotonic() < deadline:
            time.sleep(0.2)
        return pids

    def assert_nothing_left(self, settle_s: float = 10.0) -> None:
        pids = self.leftovers(settle_s)
        assert not pids, f"still running from {self.folder}:\n{describe(pids)}"

    def cleanup(self) -> None:
        for process in self.started:
            if process.poll() is None:
                self.stop(process)
        kill_pids(processes_from(self.folder))


@pytest.fixture
def user(tmp_path, newcomer_venv):
    newcomer = User(tmp_path / "empty-folder", newcomer_venv)
    newcomer.folder.mkdir()
    yield newcomer
    newcomer.cleanup()


def assert_one_sentence(result: subprocess.CompletedProcess, starts: str = "oncelog:") -> str:
    """A failed command as the docs promise it: non-zero exit, one line on stderr, no
    traceback; returns that line."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0, result
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    assert len(lines) == 1 and lines[0].startswith(starts), result.stderr
    return lines[0]
