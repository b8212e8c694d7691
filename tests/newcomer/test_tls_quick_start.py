"""docs/security.md's quick start, line by line as written, in an empty folder: a certificate
authority and a broker certificate made with ``openssl``, a broker with one SSL listener, and
``kcat -L`` over TLS trusting the authority."""

from __future__ import annotations

import re
import shutil
import socket
import time

import pytest

from .conftest import ROOT


def _blocks() -> list[list[str]]:
    text = (ROOT / "docs" / "security.md").read_text()
    section = text.split("## Quick start: a TLS listener", 1)[1].split("\n## ", 1)[0]
    return [block.strip().splitlines() for block in re.findall(r"```sh\n(.*?)```", section,
                                                               re.S)]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_tls_quick_start_runs_as_written(user):
    assert shutil.which("openssl") and shutil.which("kcat"), "make setup installs both"
    setup, client = _blocks()
    *making_certificates, broker_line = setup
    assert broker_line.startswith("oncelog broker ") and "9443" in broker_line
    for line in making_certificates:
        done = user.run(line)
        assert done.returncode == 0, (line, done)
    log = user.folder.parent / "broker.log"
    broker = user.start(broker_line, output=log)
    deadline = time.monotonic() + 60
    while True:
        assert broker.poll() is None, log.read_text()
        try:
            socket.create_connection(("127.0.0.1", 9443), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
    [kcat_line] = client
    listed = user.run(kcat_line)
    assert listed.returncode == 0, listed
    assert "1 brokers:" in listed.stdout and "127.0.0.1:9443" in listed.stdout, listed.stdout
    plain = user.run("kcat -b 127.0.0.1:9443 -L -m 3")
    assert plain.returncode != 0, "a PLAINTEXT client got metadata from the SSL listener"
