"""kcat (Debian's build, linking librdkafka 2.0.x) against a real broker process.

librdkafka before 2.1.2 misparses flexible-version responses that carry tagged fields at
their default values; a peer broker that sent them could not be used from kcat at all.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest



@pytest.fixture(autouse=True)
def kcat_installed():
    assert shutil.which("kcat"), "kcat is missing: `make setup` installs it"


def kcat(broker, *args, stdin: str | None = None) -> str:
    result = subprocess.run(["kcat", "-b", broker.bootstrap, *args], input=stdin,
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_metadata_produce_consume(broker):
    lines = "\n".join(f"key{i}:value{i}" for i in range(20)) + "\n"
    kcat(broker, "-P", "-t", "kc", "-K:", "-z", "snappy", stdin=lines)
    listing = kcat(broker, "-L")
    assert 'topic "kc" with 1 partitions' in listing
    assert f"broker 1 at 127.0.0.1:{broker.port}" in listing
    out = kcat(broker, "-C", "-t", "kc", "-e", "-f", "%k=%s@%o\n")
    assert out.splitlines() == [f"key{i}=value{i}@{i}" for i in range(20)]
    tail = kcat(broker, "-C", "-t", "kc", "-o", "-3", "-e", "-f", "%s\n")
    assert tail.splitlines() == ["value17", "value18", "value19"]
