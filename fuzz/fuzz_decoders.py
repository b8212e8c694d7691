"""Coverage-guided fuzzing (atheris/libFuzzer) of every request decoder and the batch validator.

Each input is treated the way the broker's read path treats bytes from a client: as a
request frame (header, then the body decoder of whichever of our APIs its header names -
all of them are reachable, and the corpus holds real clients' requests for each), as a
record batch (``validate_batch``, then ``decode_records``), and, when it is a produce request
that decodes, each of its partitions' batches through the validator as the produce path does.
The only exception allowed out is ``KafkaError``; anything else is a crash that libFuzzer
saves and reports. libFuzzer's ``-timeout`` and ``-rss_limit_mb`` turn a slow or greedy input
into a failure too.

Why atheris: coverage guidance finds the inputs that reach new branches of the generated
decoders (compiled at run time, so they are instrumented explicitly below) far faster than
blind mutation, and libFuzzer keeps a minimal corpus and the crashing input.

    .venv/bin/python fuzz/fuzz_decoders.py NEW_CORPUS_DIR fuzz/corpus/requests \\
        fuzz/corpus/batches -max_total_time=60 -timeout=5 -rss_limit_mb=2048

libFuzzer writes new interesting inputs into the first directory; keep the repository's
corpus second so a run does not change it (``make fuzz`` merges the findings back).
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

with atheris.instrument_imports(include=["oncelog.protocol", "kafka.protocol"]):
    from oncelog.protocol import messages
    from oncelog.protocol.api_keys import ApiKey
    from oncelog.protocol.batches import iter_headers, validate_batch
    from oncelog.protocol.errors import KafkaError
    from oncelog.protocol.records import decode_records


def _instrument_generated_decoders() -> None:
    """The request decoders are generated at run time (``messages.bounded_decoder``), so
    import-time instrumentation misses them: generate every one now and instrument it."""
    for cls in messages.REQUESTS.values():
        for version in range(cls.max_version + 1):
            messages.bounded_decoder(cls, version)
    for key, decoder in list(messages._DECODERS.items()):
        messages._DECODERS[key] = atheris.instrument_func(decoder)


def _batch(data: bytes) -> None:
    try:
        header = validate_batch(data, 0, len(data))
    except KafkaError:
        return
    try:
        assert len(decode_records(data[:header.size], header)) == header.records_count
    except KafkaError:
        pass


def _request(data: bytes) -> None:
    try:
        header = messages.decode_request_header(data)
    except KafkaError:
        return
    assert 0 <= header.body_offset <= len(data)
    if not header.known_api:
        return
    try:
        request = messages.decode_request(header, data)
    except KafkaError:
        return
    if header.api_key == ApiKey.PRODUCE:
        for topic in request.topic_data or ():
            for partition in topic.partition_data or ():
                records = partition.records or b""
                for position, _ in iter_headers(records):
                    try:
                        validate_batch(records, position, len(records))
                    except KafkaError:
                        pass


def test_one_input(data: bytes) -> None:
    _request(data)
    _batch(data)


def main() -> None:
    _instrument_generated_decoders()
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
