"""docs/security.md's quick starts, line by line as written, in an empty folder: a certificate
authority and a broker certificate made with ``openssl``, a broker with one SSL listener, and
``kcat -L`` over TLS trusting the authority; a SCRAM user made with ``oncelog users add``, a
broker with a SASL_PLAINTEXT listener, and ``kcat -L`` logged in as that user; then, on that
broker, oncelog's own commands with the ``--command-config`` file the doc writes."""

from __future__ import annotations

import re
import shutil
import socket
import time

import pytest

from .conftest import ROOT


def _blocks(title: str = "a TLS listener", whole: bool = False) -> list:
    """The ``sh`` blocks of a quick start: each a list of lines (or, ``whole``, its text)."""
    text = (ROOT / "docs" / "security.md").read_text()
    section = text.split(f"## Quick start: {title}", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    return blocks if whole else [block.strip().splitlines() for block in blocks]


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
    _wait_for(broker, 9443, log)
    [kcat_line] = client
    listed = user.run(kcat_line)
    assert listed.returncode == 0, listed
    assert "1 brokers:" in listed.stdout and "127.0.0.1:9443" in listed.stdout, listed.stdout
    plain = user.run("kcat -b 127.0.0.1:9443 -L -m 3")
    assert plain.returncode != 0, "a PLAINTEXT client got metadata from the SSL listener"


def _wait_for(broker, port: int, log) -> None:
    deadline = time.monotonic() + 60
    while True:
        assert broker.poll() is None, log.read_text()
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_sasl_quick_start_runs_as_written(user):
    setup, client = _blocks("SASL/SCRAM")
    adding, broker_line = setup
    added = user.run(adding)
    assert added.returncode == 0 and "alice" in added.stdout, added
    assert "alice-secret" not in (user.folder / "scram-data" / "scram-credentials.json"
                                  ).read_text()
    log = user.folder.parent / "sasl-broker.log"
    broker = user.start(broker_line, output=log)
    _wait_for(broker, 9444, log)
    [kcat_line] = client
    listed = user.run(kcat_line)
    assert listed.returncode == 0 and "127.0.0.1:9444" in listed.stdout, listed
    wrong = user.run(kcat_line.replace("alice-secret", "not-it") + " -m 3")
    assert wrong.returncode != 0, "a wrong password got metadata"

    [commands] = _blocks("oncelog's commands as alice", whole=True)
    done = user.run(commands)  # one shell script: the block has a here-document
    assert done.returncode == 0, done
    assert "created topic orders" in done.stdout and "produced 2 records" in done.stderr, done
    assert [line.split("\t")[2:] for line in done.stdout.splitlines() if "\t" in line] == [
        ['"k1"', "(no headers)", "hello"], ['"k2"', "(no headers)", "world"]], done.stdout
    assert (user.folder / "client.properties").stat().st_mode & 0o077 == 0
    listed = user.run("oncelog topics list -b 127.0.0.1:9444 --command-config "
                      "client.properties")  # the README's line
    assert listed.returncode == 0 and "orders\t1 partitions" in listed.stdout, listed
    wrong = user.run(commands.replace("alice-secret", "not-it").replace(
        "client.properties", "wrong.properties"))
    assert wrong.returncode != 0
    # each of the three commands: one line, no traceback, the password nowhere
    assert wrong.stderr.strip().splitlines() == 3 * [
        "oncelog: cannot log in to a broker at 127.0.0.1:9444: SASL authentication of alice "
        "with SCRAM-SHA-512 failed: Authentication failed during authentication due to "
        "invalid credentials with SASL mechanism SCRAM-SHA-512"], wrong


def test_the_acl_commands_run_as_written(user):
    """docs/security.md's ``oncelog acls`` lines, as written, in an empty folder: each adds
    what it says, ``list --topic orders`` shows every ACL that applies to orders, and
    ``remove`` takes the DENY away again."""
    text = (ROOT / "docs" / "security.md").read_text()
    section = text.split("## ACLs", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```sh\n(.*?)```", section, re.S)
    producer, consumer, deny, listing, removing = block.strip().splitlines()
    for line in (producer, consumer, deny):
        done = user.run(line)
        assert done.returncode == 0, (line, done)
    listed = user.run(listing)
    assert listed.returncode == 0, listed
    rows = sorted(line.split("\t") for line in listed.stdout.splitlines()[1:])
    assert rows == sorted([
        ["Topic", "orders", "literal", "User:alice", "*", "Write", "Allow"],
        ["Topic", "orders", "literal", "User:alice", "*", "Describe", "Allow"],
        ["Topic", "orders", "literal", "User:alice", "*", "Create", "Allow"],
        ["Topic", "orders", "literal", "User:bob", "*", "Read", "Allow"],
        ["Topic", "orders", "literal", "User:bob", "*", "Describe", "Allow"]]), listed.stdout
    removed = user.run(removing)
    assert removed.returncode == 0 and "secret-\tprefixed\tUser:bob" in removed.stdout, removed
    assert "secret-" not in user.run("oncelog acls list --data-dir acl-data").stdout
    again = user.run(removing)
    assert again.returncode == 1 and again.stderr.strip() == "oncelog: no such ACL", again
