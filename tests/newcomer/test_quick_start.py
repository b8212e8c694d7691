"""The README's first commands, typed by a newcomer in an empty folder with only the fresh
virtualenv on ``PATH``: "Running a broker" and "Client commands".

A broker with its documented flags (``--listen``, a relative ``--data-dir``), a topic created,
two records produced with the README's own ``produce`` line and read back with ``consume``,
``kcat -L`` against it; two of the documented errors (the topic again, a second broker on the
same data directory), each one ``oncelog:`` line and a non-zero exit; SIGINT stops the broker
cleanly; nothing is left running from the folder.
"""

from __future__ import annotations

import shutil
import socket
import time

import pytest

from oncelog.broker.process import free_port

from .conftest import assert_one_sentence


def wait_until_listening(address: tuple[str, int], process, log, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the broker exited:\n{log.read_text()[-3000:]}"
        try:
            socket.create_connection(address, timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"the broker did not listen within {timeout_s:g} s:\n"
                         f"{log.read_text()[-3000:]}")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_broker_and_the_client_commands_from_an_empty_folder(user):
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    log = user.folder.parent / "broker.log"
    broker = user.start(f"oncelog broker --listen {bootstrap} --data-dir data", output=log)
    wait_until_listening(("127.0.0.1", port), broker, log)
    assert (user.folder / "data").is_dir(), "a relative --data-dir is the folder's own"

    created = user.run(f"oncelog topics create orders --partitions 3 -b {bootstrap}")
    assert created.returncode == 0 and "orders" in created.stdout, created
    produced = user.run(f"printf 'k1:hello\\nk2:world\\n' | oncelog produce orders -K : "
                        f"-H source=shell --acks all --compression zstd -b {bootstrap}")
    assert produced.returncode == 0, produced
    consumed = user.run(f"oncelog consume orders -b {bootstrap}")
    assert consumed.returncode == 0, consumed
    assert sorted(line.split()[-1] for line in consumed.stdout.splitlines()) == \
        ["hello", "world"], consumed.stdout
    if shutil.which("kcat"):
        listed = user.run(f"kcat -b {bootstrap} -L")
        assert listed.returncode == 0 and 'topic "orders" with 3 partitions' in listed.stdout

    again = assert_one_sentence(user.run(f"oncelog topics create orders -b {bootstrap}"))
    assert "orders" in again and "already exists" in again
    second = user.run(f"oncelog broker --listen 127.0.0.1:{free_port()} --data-dir data")
    assert "in use by another broker" in assert_one_sentence(second)

    user.interrupt(broker)  # Ctrl-C
    assert broker.wait(60) == 0, log.read_text()[-3000:]
    assert "Traceback" not in log.read_text() and "stopped cleanly" in log.read_text()
    user.assert_nothing_left()
