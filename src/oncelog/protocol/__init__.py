"""The Kafka wire protocol: codecs and error codes, with no sockets and no asyncio.

- ``messages`` - request and response classes from kafka-python's JSON schemas (pinned),
  wrapped so the codec library can be replaced; request headers, bounded decoding.
- ``api_keys`` - ``ApiKey``; ``errors`` - ``ErrorCode`` and ``KafkaError``.
- ``batches`` - the 61-byte RecordBatch v2 header and CRC-32C: the only part of a batch the
  broker reads or writes; ``control_records`` - transaction markers (KIP-98).
- ``records`` - records inside a batch, for tools and tests (never on a hot path);
  ``varints`` - Kafka's varints.
- ``produce_response`` and ``fetch_body`` - the two hot responses, encoded without the
  codec's classes or without copying the records into them.

Importing this package imports nothing; ``messages`` loads the schemas when first imported.
"""
