"""The `oncelog` command, run as a user would, against a real broker process."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic


def oncelog(*args: str, stdin: str | None = None, check: bool = True, timeout: float = 60):
    result = subprocess.run([sys.executable, "-m", "oncelog", *args], input=stdin,
                            capture_output=True, text=True, timeout=timeout)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def test_topics_lifecycle(broker):
    b = ["--bootstrap", broker.bootstrap]
    out = oncelog("topics", "create", "orders", "-p", "3", "-c", "retention.ms=60000", *b)
    assert "created topic orders" in out.stdout
    assert "orders\t3 partitions" in oncelog("topics", "list", *b).stdout
    described = oncelog("topics", "describe", "orders", *b).stdout
    assert "orders: 3 partitions" in described and "retention.ms=60000" in described
    # leader, leader epoch, replicas, isr, offline replicas, offsets
    assert described.count("\t1\t0\t[1]\t[1]\t[]\t0\t0") == 3
    again = oncelog("topics", "create", "orders", *b, check=False)
    assert again.returncode == 1
    assert again.stderr.count("\n") == 1 and "already exists" in again.stderr
    assert "deleted topic orders" in oncelog("topics", "delete", "orders", *b).stdout
    assert "orders" not in oncelog("topics", "list", *b).stdout


def test_produce_and_consume_with_keys_headers_and_positions(broker):
    b = ["--bootstrap", broker.bootstrap]
    oncelog("topics", "create", "lines", "-p", "1", *b)
    before = datetime.now().isoformat(timespec="milliseconds")
    oncelog("produce", "lines", "-K", ":", "-H", "source=cli", *b,
            stdin="k1:first\nk2:second\nthird\n")
    time.sleep(0.05)
    middle = datetime.now().isoformat(timespec="milliseconds")
    oncelog("produce", "lines", *b, stdin="fourth\n")
    text = [without_timestamp(line)
            for line in oncelog("consume", "lines", *b).stdout.splitlines()]
    assert text == ['0:0\t"k1"\t{"source": "cli"}\tfirst', '0:1\t"k2"\t{"source": "cli"}\tsecond',
                    '0:2\t(no key)\t{"source": "cli"}\tthird',
                    "0:3\t(no key)\t(no headers)\tfourth"]
    records = [json.loads(line) for line in
               oncelog("consume", "lines", "--format", "json", "-c", "2", *b).stdout.splitlines()]
    assert [(r["key"], r["value"], r["headers"]) for r in records] == [
        ("k1", "first", {"source": "cli"}), ("k2", "second", {"source": "cli"})]
    assert values(oncelog("consume", "lines", "--from", "2", *b)) == ["third", "fourth"]
    assert values(oncelog("consume", "lines", "--from", middle, *b)) == ["fourth"]
    assert len(oncelog("consume", "lines", "--from", before, *b).stdout.splitlines()) == 4
    assert oncelog("consume", "lines", "--from", "latest", *b).stdout == ""


def without_timestamp(line: str) -> str:
    position, _timestamp, rest = line.split("\t", 2)
    return f"{position}\t{rest}"


def values(result) -> list[str]:
    """The value of each record ``oncelog consume`` printed (the last of five tab-separated
    fields)."""
    return [line.split("\t", 4)[4] for line in result.stdout.splitlines()]


def test_errors_are_one_sentence(broker, tmp_path):
    unreachable = oncelog("topics", "list", "--bootstrap", "127.0.0.1:1", check=False,
                          timeout=60)
    assert unreachable.returncode == 1 and "Traceback" not in unreachable.stderr
    assert unreachable.stderr.startswith("oncelog: ")
    missing = oncelog("consume", "nope", "--bootstrap", broker.bootstrap, check=False)
    assert missing.returncode == 1 and "nope" in missing.stderr
    assert "Traceback" not in missing.stderr
    ghost = oncelog("topics", "describe", "ghost", "--bootstrap", broker.bootstrap, check=False)
    assert ghost.returncode == 1 and "cannot describe topic ghost" in ghost.stderr
    ghost = oncelog("producers", "describe", "ghost", "--bootstrap", broker.bootstrap,
                    check=False)
    assert ghost.returncode == 1 and ghost.stderr.count("\n") == 1
    assert "ghost" not in oncelog("topics", "list", "--bootstrap", broker.bootstrap).stdout
    bad_from = oncelog("consume", "x", "--from", "yesterday-ish",
                       "--bootstrap", broker.bootstrap, check=False)
    assert bad_from.returncode == 1 and "--from" in bad_from.stderr
    bad_config = oncelog("broker", "--data-dir", str(tmp_path / "d"), "--set",
                         "num.partitions=zero", check=False)
    assert bad_config.returncode == 1
    assert bad_config.stderr.strip() == ("oncelog: num.partitions='zero' is invalid: "
                                         "expected an integer")
    busy = oncelog("broker", "--listen", broker.bootstrap, "--data-dir",
                   str(tmp_path / "other"), check=False)
    assert busy.returncode == 1 and "cannot listen on" in busy.stderr
    # asyncio's bind error is a sentence about a Python tuple ("error while attempting to
    # bind on address ('127.0.0.1', 9092)"); the user is told the address once, in words.
    assert busy.stderr.strip().endswith(
        f"cannot listen on {broker.bootstrap}: address already in use"), busy.stderr
    shared = oncelog("broker", "--listen", "127.0.0.1:0", "--data-dir", str(broker.data_dir),
                     check=False)
    assert shared.returncode == 1 and "in use by another broker" in shared.stderr


def test_usage_errors_are_one_line_too():
    """Click printed a usage block, a hint and the error on three lines for a bad value or a
    missing argument; now its usage errors read like every other oncelog error."""
    for args, words in [(("verify", "--seed", "abc"), "'abc' is not a valid integer"),
                        (("topics", "create"), "Missing argument 'NAME'"),
                        (("no-such-command",), "No such command")]:
        done = oncelog(*args, check=False)
        assert done.returncode == 2
        assert done.stderr.startswith("oncelog: ") and done.stderr.count("\n") == 1
        assert words in done.stderr and "--help" in done.stderr
    assert oncelog("--help").stdout.startswith("Usage: oncelog")


# Apache Kafka 3.9's config/server.properties (ZooKeeper mode), comments left out.
STOCK_SERVER_PROPERTIES = """\
broker.id=0
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.retention.check.interval.ms=300000
group.initial.rebalance.delay.ms=0
"""


def test_a_misspelt_setting_stops_the_broker_with_one_line_naming_the_closest(tmp_path):
    """Regression: log.flush.polcy=ack was logged as ignored and the broker served with the
    default flush policy."""
    done = oncelog("broker", "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path),
                   "--set", "log.flush.polcy=ack", check=False, timeout=30)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last == ("oncelog: unknown broker config 'log.flush.polcy': neither oncelog's nor "
                    "Apache Kafka's; did you mean 'log.flush.policy'?")
    assert not (tmp_path / "meta.properties").exists()  # refused before touching the data


def test_kafkas_stock_server_properties_starts_a_broker(broker_factory, tmp_path):
    properties = tmp_path / "server.properties"
    properties.write_text(STOCK_SERVER_PROPERTIES)
    broker = broker_factory(extra_args=["--config", str(properties)])
    b = ["--bootstrap", broker.bootstrap]
    oncelog("produce", "stock", *b, stdin="x\n")
    assert "stock\t1 partitions" in oncelog("topics", "list", *b).stdout
    assert "num.io.threads" in broker.log_path.read_text()  # listed as ignored


def test_create_topic_with_a_misspelt_config_gets_invalid_config(broker):
    done = oncelog("topics", "create", "typo", "--bootstrap", broker.bootstrap,
                   "--config", "retention.msec=1000", check=False)
    assert done.returncode != 0
    assert done.stderr == ("oncelog: cannot create topic typo: unknown topic config "
                           "'retention.msec'; did you mean 'retention.ms'?\n")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    future = admin.create_topics([NewTopic("typo", 1, 1, config={"retention.msec": "1"})])["typo"]
    with pytest.raises(KafkaException) as raised:
        future.result(30)
    assert raised.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "did you mean 'retention.ms'?" in raised.value.args[0].str()
    assert "typo" not in oncelog("topics", "list", "--bootstrap", broker.bootstrap).stdout


def test_config_file_and_set_flags(broker_factory, tmp_path):
    properties = tmp_path / "server.properties"
    properties.write_text("# a stock Kafka file works\nnum.partitions=2\n"
                          "num.network.threads=3\nlog.retention.hours=1\n")
    broker = broker_factory(extra_args=["--config", str(properties)],
                            settings={"num.partitions": "5"})
    b = ["--bootstrap", broker.bootstrap]
    oncelog("produce", "auto", *b, stdin="x\n")
    assert "auto\t5 partitions" in oncelog("topics", "list", *b).stdout  # --set wins
    described = oncelog("topics", "describe", "auto", *b).stdout
    assert "retention.ms=3600000" in described
    assert "num.network.threads" in broker.log_path.read_text()  # warned, ignored


def test_consume_prints_keys_headers_and_timestamps_unambiguously(broker):
    """Regression (issue 29): consume printed `partition:offset key value`, so an unkeyed
    record "line one" came out as `0:0 line one`, exactly like key "line" with value "one",
    and neither timestamps nor headers were shown. Now each record is five tab-separated
    fields: the position, an ISO-8601 UTC timestamp, the key as a JSON string or (no key),
    the headers as a JSON object or (no headers), and the value as it is."""
    b = ["--bootstrap", broker.bootstrap]
    oncelog("topics", "create", "ambiguous", "-p", "1", *b)
    before = datetime.now(UTC)
    oncelog("produce", "ambiguous", *b, stdin="line one\n")
    oncelog("produce", "ambiguous", "-K", " ", "-H", "trace=a b", "-H", "source=cli", *b,
            stdin="line one\n")
    after = datetime.now(UTC)
    unkeyed, keyed = oncelog("consume", "ambiguous", *b).stdout.splitlines()
    assert unkeyed != keyed.replace('"line"', "line")  # no longer the same line twice
    position, timestamp, key, headers, value = unkeyed.split("\t")
    assert (position, key, headers, value) == ("0:0", "(no key)", "(no headers)", "line one")
    assert timestamp.endswith("Z")
    assert before.replace(microsecond=0) <= datetime.fromisoformat(timestamp) <= after
    position, timestamp, key, headers, value = keyed.split("\t")
    assert (position, key, value) == ("0:1", '"line"', "one")
    assert json.loads(headers) == {"trace": "a b", "source": "cli"}
    # the printed timestamp is one --from takes back
    assert values(oncelog("consume", "ambiguous", "--from", timestamp, *b)) == ["one"]


@pytest.mark.slow
def test_ctrl_c_ends_consume_follow_with_status_0(broker):
    """Regression (issue 29): Ctrl-C, the normal way to leave `consume --follow`, printed
    "oncelog: aborted" and exited 1 (click's KeyboardInterrupt handling). Now consume ends
    quietly with status 0, and in a group commits every record it printed: the first
    Ctrl-C asks the reader to stop between polls (a KeyboardInterrupt landing between
    printing a record and asking for the next left that record uncommitted)."""
    b = ["--bootstrap", broker.bootstrap]
    oncelog("topics", "create", "followed", "-p", "1", *b)
    oncelog("produce", "followed", *b, stdin="one\ntwo\n")
    for group in ([], ["--group", "followers"]):
        follower = subprocess.Popen([sys.executable, "-m", "oncelog", "consume", "followed",
                                     "--follow", *group, *b], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
        try:
            assert follower.stdout.readline().endswith("\tone\n")  # it is following
            assert follower.stdout.readline().endswith("\ttwo\n")
            follower.send_signal(signal.SIGINT)
            _, err = follower.communicate(timeout=30)
        finally:
            follower.kill()
            follower.wait()
        assert follower.returncode == 0, err
        assert "aborted" not in err and "Traceback" not in err and err == ""
    assert "followed\t0\t2\t2\t0" in oncelog("groups", "describe", "followers", *b).stdout


def test_dash_v_and_dash_capital_v_print_the_version():
    """Regression (issue 29): `oncelog -v` said "No such option: -v"; -v and -V now print the
    version as --version does."""
    version = oncelog("--version").stdout
    assert version.startswith("oncelog, version ")
    assert oncelog("-v").stdout == version and oncelog("-V").stdout == version


def test_the_readme_states_the_exit_statuses_the_commands_use(broker):
    """Regression (issue 29): usage errors exit 2 (click's and POSIX tools' convention) while
    the README said every error exits 1. The README's one exit-status table now says what
    each status means, and the commands do what it says."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    section = readme.split("### Exit status", 1)[1].split("\n#", 1)[0]
    rows = {line.split("|")[1].strip(): line.split("|")[2]
            for line in section.splitlines() if line.startswith("| ") and "---" not in line}
    assert "usage error" in rows["2"] and "one sentence" in rows["1"]
    assert "Ctrl-C" in rows["0"] and "offline" in rows["2"] and "inconclusive" in rows["3"]
    assert oncelog("topics", "create", check=False).returncode == 2
    assert oncelog("produce", "-b", "notaport", "t", check=False).returncode == 2
    assert oncelog("topics", "describe", "ghost", "-b", broker.bootstrap,
                   check=False).returncode == 1


def test_messages_name_the_bad_value_not_python_internals(tmp_path):
    """Regression (issue 29): a bad value came back in Python's words - `invalid literal for
    int() with base 10: 'zero'` for --set num.partitions=zero, `ConnectionRefusedError:
    [Errno 111] Connect call failed` from `transactions list` -, a data directory that
    cannot be created was a traceback, and --listen 127.0.0.1:99999 "listened" on the port
    modulo 65536. Each is now one sentence naming the value."""
    cases = [
        (("broker", "--data-dir", str(tmp_path / "d"), "--set", "num.partitions=zero"),
         "num.partitions='zero' is invalid: expected an integer"),
        (("broker", "--data-dir", str(tmp_path / "d"), "--listen", "127.0.0.1:99999"),
         "the port 99999 is not a number from 0 to 65535"),
        (("broker", "--data-dir", str(tmp_path / "file" / "d"), "--listen", "127.0.0.1:0"),
         f"cannot use {tmp_path / 'file' / 'd'}: Not a directory"),
        (("transactions", "list", "-b", f"127.0.0.1:{closed_port()}"), "connection refused"),
        (("demo", "--port", "99999"), "99999 is not in the range 1<=x<=65535"),
        (("transactions", "list", "--state", "Bogus"), "'Bogus' is not one of 'Empty'"),
    ]
    (tmp_path / "file").write_text("")
    for args, words in cases:
        done = oncelog(*args, check=False, timeout=30)
        assert done.returncode in (1, 2), done
        assert done.stderr.startswith("oncelog: ") and done.stderr.count("\n") == 1, done.stderr
        assert words in done.stderr
        for internal in ("invalid literal", "Errno", "Error:", "Traceback"):
            assert internal not in done.stderr


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
