"""What TLS and SASL cost: produce and consume throughput over SSL and SASL_SSL as ratios of
PLAINTEXT, on one broker in one run, and SCRAM-SHA-512 authentications per second.

    .venv/bin/python benchmarks/security.py [--runs 3] [--count 300000] [--value-bytes 1024]

One oncelog broker listens on PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512, a user made with
``oncelog users add`` at 4,096 iterations; certificates from ``oncelog.testing.certificates``,
EC P-256). Each run produces ``--count`` values to a new topic and reads them back through
each listener in turn (PLAINTEXT, SSL, SASL_SSL, then the next run), every client in its own
process (``clients.py``: the produce and consume cases of ``throughput.py``, acks=1). The
table gives each listener's median MB/s and its ratio to PLAINTEXT's median, and the broker's
CPU seconds per MB. Then ``--auth-seconds`` of authentications: ``--auth-clients`` threads,
each opening a SASL_SSL connection, running the whole SCRAM-SHA-512 exchange (kafka-python's
client side) and closing, as fast as the broker answers; connections per second, and the
same over SASL_PLAINTEXT (no TLS handshake).

A measuring tool: nothing passes or fails on a figure. Raw runs go to
``benchmarks/results/security-<timestamp>.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from throughput import Target, Topics, run_client  # noqa: E402

PASSWORD = "bench-secret"
LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")


def client_settings(listener: str, ca: Path) -> dict:
    if listener == "PLAINTEXT":
        return {}
    settings = {"security.protocol": listener, "ssl.ca.location": str(ca)}
    if listener == "SASL_SSL":
        settings.update({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bench",
                         "sasl.password": PASSWORD})
    return settings


def start_broker(directory: Path) -> tuple[Target, dict[str, str], Path]:
    from oncelog.broker.process import free_port
    from oncelog.testing.certificates import CertificateAuthority
    ca = CertificateAuthority(directory / "tls")
    keystore = ca.issue("broker").keystore
    data_dir = directory / "broker"
    added = subprocess.run([sys.executable, "-m", "oncelog", "users", "add", "bench",
                            "--mechanism", "SCRAM-SHA-512", "--data-dir", str(data_dir)],
                           input=PASSWORD + "\n", capture_output=True, text=True, timeout=60)
    assert added.returncode == 0, added.stderr
    ports = {name: free_port() for name in (*LISTENERS, "SASL_PLAINTEXT")}
    settings = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "ssl.keystore.location": str(keystore),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "log.dirs": str(data_dir),
    }
    # start_oncelog's BrokerProcess listens where ``listeners`` says (the first is PLAINTEXT)
    from oncelog.broker.process import BrokerProcess
    process = BrokerProcess(data_dir, port=ports["PLAINTEXT"], settings=settings,
                            log_path=directory / "broker.log",
                            extra_args=["--log-level", "WARNING"])
    process.start()
    target = Target("oncelog", process.bootstrap, process)
    return target, {name: f"127.0.0.1:{port}" for name, port in ports.items()}, ca.certificate


def throughput_runs(target: Target, bootstraps: dict[str, str], ca: Path,
                    options: argparse.Namespace) -> list[dict]:
    topics = Topics(bootstraps["PLAINTEXT"], uuid.uuid4().hex[:8])
    results = []
    for run in range(options.runs):
        for listener in LISTENERS:
            extra = client_settings(listener, ca)
            topic = topics.create(f"{listener.lower()}-{run}")
            produced = target.annotate(run_client(
                "produce", 600, bootstrap=bootstraps[listener], topic=topic,
                value_size=options.value_bytes, count=options.count, acks="1", extra=extra))
            consumed = target.annotate(run_client(
                "consume", 600, bootstrap=bootstraps[listener], topic=topic, extra=extra))
            for case, result in (("produce", produced), ("consume", consumed)):
                result.update(listener=listener, case=case, run=run)
                results.append(result)
                print(f"  run {run + 1} {listener:<9} {case:<8} "
                      f"{result.get('mb_per_s', 0):7.1f} MB/s  "
                      f"broker {result.get('broker_cpu_s_per_mb', 0) or 0:.4f} CPU s/MB"
                      + (f"  ERROR {result['error']}" if "error" in result else ""))
            topics.delete(topic)
    return results


def authentications(bootstrap: str, tls_ca: Path | None, seconds: float,
                    threads: int) -> dict:
    """Whole SCRAM-SHA-512 logins per second over ``threads`` connections in a loop."""
    import ssl

    from kafka.net.sasl.scram import ScramClient

    from oncelog.protocol import messages

    context = None
    if tls_ca is not None:
        context = ssl.create_default_context(cafile=str(tls_ca))
    done, failed = [0] * threads, [0] * threads
    deadline = time.monotonic() + seconds

    def login(index: int) -> None:
        while time.monotonic() < deadline:
            try:
                with _Connection(bootstrap, context) as connection:
                    client = ScramClient("bench", PASSWORD, "SCRAM-SHA-512")
                    connection.request(messages.SaslHandshakeRequest(
                        mechanism="SCRAM-SHA-512"), 1)
                    first = connection.request(messages.SaslAuthenticateRequest(
                        auth_bytes=client.first_message()), 2)
                    client.process_server_first_message(bytes(first.auth_bytes))
                    final = connection.request(messages.SaslAuthenticateRequest(
                        auth_bytes=client.final_message()), 2)
                done[index] += final.error_code == 0
                failed[index] += final.error_code != 0
            except OSError:
                failed[index] += 1

    started = time.monotonic()
    workers = [threading.Thread(target=login, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.monotonic() - started
    return {"logins": sum(done), "failed": sum(failed), "seconds": elapsed,
            "per_s": sum(done) / elapsed}


class _Connection:
    """One Kafka-protocol connection, TLS when given a context: requests one at a time."""

    def __init__(self, bootstrap: str, context) -> None:
        import socket
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        if context is not None:
            self.sock = context.wrap_socket(self.sock, server_hostname=host)
        self.correlation_id = 0

    def __enter__(self) -> _Connection:
        return self

    def __exit__(self, *exc) -> None:
        self.sock.close()

    def request(self, request, version: int):
        import struct

        from oncelog.protocol import messages
        self.correlation_id += 1
        api_key = request.API_KEY
        head = struct.pack(">hhih", api_key, version, self.correlation_id, 5) + b"bench"
        flexible = messages.is_flexible(api_key, version)
        payload = head + (b"\x00" if flexible else b"") + bytes(request.encode(version=version))
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", self._read(4))
        frame = self._read(size)
        return messages.RESPONSES[api_key].decode(frame[5:] if flexible else frame[4:],
                                                  version=version)

    def _read(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return data


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--count", type=int, default=300_000)
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--auth-seconds", type=float, default=10.0)
    parser.add_argument("--auth-clients", type=int, default=4)
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="oncelog-bench-security-") as directory:
        target, bootstraps, ca = start_broker(Path(directory))
        try:
            print(f"{options.runs} runs of {options.count} x {options.value_bytes} B per "
                  "listener")
            results = throughput_runs(target, bootstraps, ca, options)
            logins = {
                "SASL_SSL": authentications(bootstraps["SASL_SSL"], ca, options.auth_seconds,
                                            options.auth_clients),
                "SASL_PLAINTEXT": authentications(bootstraps["SASL_PLAINTEXT"], None,
                                                  options.auth_seconds, options.auth_clients),
            }
        finally:
            broker = target.close()
    print()
    print(f"{'listener':<10} {'case':<8} {'MB/s (median)':>14} {'of PLAINTEXT':>13} "
          f"{'broker CPU s/MB':>16}")
    table = []
    for case in ("produce", "consume"):
        base = statistics.median(r["mb_per_s"] for r in results
                                 if r["case"] == case and r["listener"] == "PLAINTEXT")
        for listener in LISTENERS:
            runs = [r for r in results if r["case"] == case and r["listener"] == listener]
            median = statistics.median(r["mb_per_s"] for r in runs)
            cpu = statistics.median(r.get("broker_cpu_s_per_mb") or 0 for r in runs)
            table.append({"case": case, "listener": listener, "mb_per_s": median,
                          "ratio": median / base, "broker_cpu_s_per_mb": cpu,
                          "runs": [r["mb_per_s"] for r in runs]})
            print(f"{listener:<10} {case:<8} {median:14.1f} {median / base:13.2f} "
                  f"{cpu:16.4f}")
    print()
    for listener, result in logins.items():
        print(f"SCRAM-SHA-512 logins over {listener}: {result['per_s']:.0f}/s "
              f"({result['logins']} in {result['seconds']:.1f} s, "
              f"{options.auth_clients} clients, {result['failed']} failed)")
    out = HERE / "results" / f"security-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"options": vars(options), "table": table, "runs": results,
                               "logins": logins, "broker": broker}, indent=1, default=str))
    print(f"raw runs: {out}")


if __name__ == "__main__":
    main()
