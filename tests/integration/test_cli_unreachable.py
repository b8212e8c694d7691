"""Every ``oncelog`` command that talks to a broker, pointed at one it cannot use.

Regression (issue 29): librdkafka retries an address it cannot use until a request times
out, so `oncelog topics create x -b 127.0.0.1:1` waited 15 s and printed `oncelog: cannot
create topic x: ` (a timeout exception with an empty message), `echo x | oncelog produce -b
notaport orders` waited 30 s for `Local: Message timed out`, and with empty input it exited
0 without ever looking at the address; `transactions` and `cluster status` leaked
`ConnectionRefusedError: [Errno 111]` and `invalid literal for int()`. Now the --bootstrap
option checks the address before a command builds a client (``oncelog.client.bootstrap``):
a malformed one is a usage error (exit 2), one that is refused, does not resolve or does
not answer is one sentence naming it and the cause (exit 1), each within a few seconds.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

# One command per family and sub-command; stdin is given to every one (produce reads it).
COMMANDS = [
    ("topics", "create", "x"), ("topics", "list"), ("topics", "describe", "x"),
    ("topics", "delete", "x"),
    ("produce", "x"), ("consume", "x"), ("consume", "x", "--group", "g", "--follow"),
    ("groups", "list"), ("groups", "describe", "g"), ("groups", "delete", "g"),
    ("groups", "reset-offsets", "g", "--topic", "x", "--to-earliest"),
    ("transactions", "list"), ("transactions", "describe", "t"),
    ("transactions", "abort", "--topic", "x", "--partition", "0", "--start-offset", "0"),
    ("producers", "describe", "x"),
    ("cluster", "status"),
]
SECONDS_MAX = 8.0  # a Python start-up, the 3 s check, and slack for a busy machine


def run(args, bootstrap: str,
        stdin: str = "a record\n") -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "oncelog", *args, "--bootstrap", bootstrap],
                          input=stdin, capture_output=True, text=True, timeout=60, check=False)
    return done, time.monotonic() - started


def assert_one_sentence(done, elapsed: float, status: int, *words: str) -> None:
    assert done.returncode == status, done
    assert elapsed < SECONDS_MAX, f"{elapsed:.1f} s: {done.stderr}"
    assert done.stderr.startswith("oncelog: ") and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr and "Errno" not in done.stderr
    for word in words:
        assert word in done.stderr


@pytest.fixture(scope="module")
def closed_address() -> str:
    with socket.socket() as probe:  # bound, then released: nothing listens there
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


@pytest.mark.slow
@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_refused_an_unresolvable_and_a_malformed_address(args, closed_address):
    done, elapsed = run(args, closed_address)
    assert_one_sentence(done, elapsed, 1, f"cannot reach a broker at {closed_address}",
                        "connection refused")
    done, elapsed = run(args, "no-such-host.invalid:9092")
    assert_one_sentence(done, elapsed, 1, "no-such-host.invalid:9092", "does not resolve")
    done, elapsed = run(args, "notaport")
    assert_one_sentence(done, elapsed, 2, "'notaport' is not HOST:PORT", "--help")


def test_produce_with_empty_input_still_checks_the_address(closed_address):
    """It exited 0 ("produced 0 records") whatever the address was."""
    done, elapsed = run(("produce", "x"), closed_address, stdin="")
    assert_one_sentence(done, elapsed, 1, closed_address, "connection refused")


@pytest.mark.slow
def test_a_port_that_accepts_but_never_answers_times_out_in_seconds():
    """A stopped (SIGSTOP) or hung broker: the kernel completes the connection, nobody
    answers. librdkafka waited for its request timeouts (15-30 s)."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        for args in (("topics", "create", "x"), ("produce", "x")):
            done, elapsed = run(args, address)
            assert_one_sentence(done, elapsed, 1, address, "timed out")


def test_the_first_server_that_answers_is_enough_and_all_are_named_when_none_does(
        broker, closed_address):
    both = f"{closed_address},{broker.bootstrap}"
    done, _ = run(("topics", "list"), both)
    assert done.returncode == 0, done.stderr
    done, elapsed = run(("topics", "list"), f"{closed_address},no-such-host.invalid:1")
    assert_one_sentence(done, elapsed, 1, f"{closed_address} (connection refused",
                        "nor at no-such-host.invalid:1 (the name no-such-host.invalid does "
                        "not resolve)")
