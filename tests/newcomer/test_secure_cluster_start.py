"""docs/security.md's secured-cluster quick start, typed as written in an empty folder:
``oncelog cluster start --secure``, then ``cluster status``, ``kcat -F`` with the client
properties it wrote, and ``cluster stop``, in another terminal. The brokers' only listener is
SASL_SSL, so every one of these commands works only if TLS, the admin's login and the
brokers' logins to each other do."""

from __future__ import annotations

import json
import re
import socket
import stat
import time

import pytest

from .conftest import ROOT

PORTS = (9192, 9193, 9194)  # what the documented command listens on


def _blocks() -> list[list[str]]:
    text = (ROOT / "docs" / "security.md").read_text()
    section = text.split("## Quick start: a secured cluster", 1)[1].split("\n## ", 1)[0]
    return [block.strip().splitlines() for block in re.findall(r"```sh\n(.*?)```", section,
                                                               re.S)]


def _taken(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_secured_cluster_quick_start_runs_as_written(user):
    busy = [port for port in PORTS if _taken(port)]
    if busy:
        pytest.skip(f"the documented command listens on 127.0.0.1:9192-9194 and another "
                    f"process listens on {busy} here")
    [start_line], [status_line, kcat_line, stop_line] = _blocks()
    assert start_line.startswith("oncelog cluster start --secure")
    log = user.folder.parent / "secure-cluster.out"
    cluster = user.start(start_line, output=log)

    deadline, status = time.monotonic() + 180, None
    while time.monotonic() < deadline:
        assert cluster.poll() is None, \
            f"cluster start exited with {cluster.returncode}:\n{log.read_text()[-3000:]}"
        status = user.run(status_line, timeout=60)
        if status.returncode == 0 and status.stdout.count("127.0.0.1:919") >= 3:
            break
        time.sleep(2)
    else:
        raise AssertionError(f"the cluster never reported 3 brokers:\n{status}\n"
                             f"{log.read_text()[-3000:]}")

    secure = user.folder / "secure-cluster" / "secure"
    passwords = json.loads((secure / "passwords.json").read_text())
    for name in ("passwords.json", "client.properties", "client-java.properties",
                 "broker.properties"):
        assert stat.S_IMODE((secure / name).stat().st_mode) == 0o600, name
    printed = log.read_text()
    assert "client.properties" in printed and "passwords.json" in printed
    assert not any(password in printed for password in passwords.values())

    listed = user.run(kcat_line, timeout=60)
    assert listed.returncode == 0 and "3 brokers:" in listed.stdout, listed
    plain = user.run("kcat -b 127.0.0.1:9192 -L -m 3")
    assert plain.returncode != 0, "a PLAINTEXT client got metadata from a secured broker"

    stopped = user.run(stop_line, timeout=180)
    assert stopped.returncode == 0, stopped
    assert cluster.wait(120) == 0, log.read_text()[-3000:]
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]
    user.assert_nothing_left(settle_s=20)
