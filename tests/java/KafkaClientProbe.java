import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Drives the Apache Kafka Java client (kafka-clients) for oncelog's integration tests
 * (tests/integration/test_java_client.py), several steps per JVM launch.
 *
 * <pre>java -cp kafka-clients.jar:slf4j-api.jar:. KafkaClientProbe BOOTSTRAP STEP...</pre>
 *
 * Each STEP is one argument: a command and {@code key=value} words. Keys with a dot are
 * Kafka client configs passed through unchanged ({@code acks=all},
 * {@code transactional.id=app}, {@code isolation.level=read_committed}); keys without one
 * are the probe's own options. Producers and consumers get names, so later steps use them.
 * A value's spaces are written {@code %20} (a JAAS line: {@code sasl.jaas.config=...%20required...}).
 *
 * <pre>
 * create    topics=a,b [partitions=1]                    Admin.createTopics
 * producer  name=P [configs]                             KafkaProducer; initTransactions if transactional
 * begin|commit|abort  producer=P                         begin/commit/abortTransaction
 * send      producer=P topic=T [count=1] [value=v] [key=k] [partition=N] [headers=true]
 *           count records, value "v-i" (just "v" when count=1); waits for every future
 * consumer  name=C topics=a,b [subscribe=true] [configs] subscribe (needs group.id), or
 *           assign every partition and seek to the beginning
 * poll      consumer=C[,D...] [count=N] [timeout_ms=20000]  polls each in turn until N records,
 *           or (no count) until every consumer has partitions and every position reached its
 *           end offset (the LSO under read_committed); then prints each one's assignment
 * commit-offsets  consumer=C                             commitSync of the current positions
 * send-offsets    producer=P consumer=C                  sendOffsetsToTransaction(positions,
 *                                                        consumer.groupMetadata())
 * close     name=X                                       close a producer or consumer
 * </pre>
 *
 * Output: one JSON object per line on stdout, {@code "event"} first: created, producer,
 * begun, committed, aborted, sent (producer, topic, partition, offset), record (consumer,
 * topic, partition, offset, key, value, headers), assignment (consumer, partitions), offsets,
 * consumer, closed; a failed step prints
 * {@code {"event":"error","step":...,"exception":SimpleName,"message":...,"causes":[...]}}
 * and the steps after it still run. Exit status: 0 when every step succeeded, 1 when one
 * failed, 2 for a step the probe does not understand.
 */
public final class KafkaClientProbe {
    private final String bootstrap;
    private final Map<String, KafkaProducer<String, String>> producers = new LinkedHashMap<>();
    private final Map<String, KafkaConsumer<String, String>> consumers = new LinkedHashMap<>();

    /** A step the probe does not understand: a bug in the test, so exit 2 at once. */
    private static final class UsageError extends RuntimeException {
        private static final long serialVersionUID = 1L;

        UsageError(String message) {
            super(message);
        }
    }

    private KafkaClientProbe(String bootstrap) {
        this.bootstrap = bootstrap;
    }

    public static void main(String[] args) {
        if (args.length < 1) {
            System.err.println("usage: KafkaClientProbe BOOTSTRAP STEP...");
            System.exit(2);
        }
        KafkaClientProbe probe = new KafkaClientProbe(args[0]);
        boolean failed = false;
        try {
            for (String step : Arrays.copyOfRange(args, 1, args.length)) {
                failed |= !probe.run(step);
            }
        } catch (UsageError usage) {
            System.err.println("KafkaClientProbe: " + usage.getMessage());
            probe.closeAll();
            System.exit(2);
        }
        probe.closeAll();
        System.exit(failed ? 1 : 0);
    }

    /** Runs one step; a client exception is reported as an error line and returns false. */
    private boolean run(String step) {
        String[] words = step.trim().split("\\s+");
        String command = words[0];
        Map<String, String> options = new LinkedHashMap<>();
        Properties configs = new Properties();
        for (String word : Arrays.copyOfRange(words, 1, words.length)) {
            int equals = word.indexOf('=');
            if (equals < 1) {
                throw new UsageError("expected key=value in step '" + step + "': " + word);
            }
            String key = word.substring(0, equals);
            String value = word.substring(equals + 1).replace("%20", " ");
            if (key.contains(".")) {
                configs.setProperty(key, value);
            } else {
                options.put(key, value);
            }
        }
        try {
            switch (command) {
                case "create" -> create(options);
                case "producer" -> producer(options, configs);
                case "begin" -> { producer(options).beginTransaction(); emit("begun", options); }
                case "commit" -> { producer(options).commitTransaction(); emit("committed", options); }
                case "abort" -> { producer(options).abortTransaction(); emit("aborted", options); }
                case "send" -> send(options);
                case "consumer" -> consumer(options, configs);
                case "poll" -> poll(options);
                case "commit-offsets" -> commitOffsets(options);
                case "send-offsets" -> sendOffsets(options);
                case "close" -> close(options);
                default -> throw new UsageError("unknown command '" + command + "'");
            }
            return true;
        } catch (UsageError usage) {
            throw usage;
        } catch (Exception error) {
            reportError(command, error);
            return false;
        }
    }

    private void create(Map<String, String> options) throws Exception {
        int partitions = Integer.parseInt(options.getOrDefault("partitions", "1"));
        List<NewTopic> topics = new ArrayList<>();
        for (String name : list(options, "topics")) {
            topics.add(new NewTopic(name, partitions, (short) 1));
        }
        Properties configs = new Properties();
        configs.setProperty("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(configs)) {
            admin.createTopics(topics).all().get(30, TimeUnit.SECONDS);
        }
        print(fields("event", "created", "topics", list(options, "topics")));
    }

    private void producer(Map<String, String> options, Properties configs) {
        String name = required(options, "name");
        configs.setProperty("bootstrap.servers", bootstrap);
        configs.putIfAbsent("max.block.ms", "30000");
        configs.putIfAbsent("delivery.timeout.ms", "30000");
        configs.putIfAbsent("request.timeout.ms", "10000");
        KafkaProducer<String, String> producer =
                new KafkaProducer<>(configs, new StringSerializer(), new StringSerializer());
        producers.put(name, producer);
        boolean transactional = configs.containsKey("transactional.id");
        if (transactional) {
            producer.initTransactions();
        }
        print(fields("event", "producer", "name", name, "transactional", transactional));
    }

    private void send(Map<String, String> options) throws Exception {
        KafkaProducer<String, String> producer = producer(options);
        String topic = required(options, "topic");
        int count = Integer.parseInt(options.getOrDefault("count", "1"));
        String valuePrefix = options.getOrDefault("value", "value");
        String keyPrefix = options.get("key");
        Integer partition = options.containsKey("partition") ? Integer.valueOf(options.get("partition")) : null;
        boolean headers = Boolean.parseBoolean(options.getOrDefault("headers", "false"));
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            String suffix = count == 1 ? "" : "-" + i;
            ProducerRecord<String, String> record = new ProducerRecord<>(topic, partition,
                    keyPrefix == null ? null : keyPrefix + suffix, valuePrefix + suffix);
            if (headers) {
                record.headers().add("n", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                record.headers().add("empty", null);
            }
            futures.add(producer.send(record));
        }
        for (Future<RecordMetadata> future : futures) {
            RecordMetadata sent = future.get(60, TimeUnit.SECONDS);
            print(fields("event", "sent", "producer", options.get("producer"), "topic", sent.topic(),
                    "partition", sent.partition(), "offset", sent.hasOffset() ? sent.offset() : null));
        }
    }

    private void consumer(Map<String, String> options, Properties configs) {
        String name = required(options, "name");
        configs.setProperty("bootstrap.servers", bootstrap);
        configs.putIfAbsent("auto.offset.reset", "earliest");
        configs.putIfAbsent("enable.auto.commit", "false");
        configs.putIfAbsent("request.timeout.ms", "10000");
        configs.putIfAbsent("default.api.timeout.ms", "30000");
        // an idle fetch waits 100 ms (not 500) at the broker: rebalances and close(), which
        // wait for the fetch in flight, take less time in these short runs
        configs.putIfAbsent("fetch.max.wait.ms", "100");
        KafkaConsumer<String, String> consumer =
                new KafkaConsumer<>(configs, new StringDeserializer(), new StringDeserializer());
        consumers.put(name, consumer);
        List<String> topics = list(options, "topics");
        if (Boolean.parseBoolean(options.getOrDefault("subscribe", "false"))) {
            consumer.subscribe(topics);
        } else {
            List<TopicPartition> partitions = new ArrayList<>();
            for (String topic : topics) {
                for (PartitionInfo info : consumer.partitionsFor(topic)) {
                    partitions.add(new TopicPartition(topic, info.partition()));
                }
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
        }
        print(fields("event", "consumer", "name", name, "group", configs.getProperty("group.id")));
    }

    /**
     * Polls one consumer, or several in turn (consumer=a,b: members of one group rebalance
     * only while each of them polls), then prints each one's assignment.
     */
    private void poll(Map<String, String> options) {
        Map<String, KafkaConsumer<String, String>> polled = new LinkedHashMap<>();
        for (String name : list(options, "consumer")) {
            polled.put(name, consumer(Map.of("consumer", name)));
        }
        Integer count = options.containsKey("count") ? Integer.valueOf(options.get("count")) : null;
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(
                Long.parseLong(options.getOrDefault("timeout_ms", "20000")));
        int seen = 0;
        while (true) {
            boolean allAtEnd = true;
            for (Map.Entry<String, KafkaConsumer<String, String>> entry : polled.entrySet()) {
                for (ConsumerRecord<String, String> record : entry.getValue().poll(Duration.ofMillis(100))) {
                    printRecord(entry.getKey(), record);
                    seen++;
                }
                allAtEnd &= count == null && atEnd(entry.getValue());
            }
            if (count != null ? seen >= count : allAtEnd) {
                break;
            }
            if (System.nanoTime() > deadline) {
                Map<String, Object> where = new LinkedHashMap<>();
                polled.forEach((name, consumer) -> where.put(name, describe(positions(consumer))));
                throw new IllegalStateException("poll: " + seen + " records before the timeout"
                        + (count == null ? ", not at the end offsets" : ", expected " + count)
                        + "; positions " + where);
            }
        }
        for (Map.Entry<String, KafkaConsumer<String, String>> entry : polled.entrySet()) {
            List<Object> assigned = new ArrayList<>();
            entry.getValue().assignment().stream().map(TopicPartition::toString).sorted()
                    .forEach(assigned::add);
            print(fields("event", "assignment", "consumer", entry.getKey(), "partitions", assigned));
        }
    }

    private static void printRecord(String consumer, ConsumerRecord<String, String> record) {
        List<Object> headers = new ArrayList<>();
        for (Header header : record.headers()) {
            headers.add(Arrays.asList(header.key(),
                    header.value() == null ? null : new String(header.value(), StandardCharsets.UTF_8)));
        }
        print(fields("event", "record", "consumer", consumer, "topic", record.topic(),
                "partition", record.partition(), "offset", record.offset(), "key", record.key(),
                "value", record.value(), "headers", headers));
    }

    /** Whether the consumer has an assignment and every position reached its end offset. */
    private static boolean atEnd(KafkaConsumer<String, String> consumer) {
        if (consumer.assignment().isEmpty()) {
            return false;
        }
        Map<TopicPartition, Long> ends = consumer.endOffsets(consumer.assignment());
        for (TopicPartition partition : consumer.assignment()) {
            if (consumer.position(partition) < ends.get(partition)) {
                return false;
            }
        }
        return true;
    }

    private static Map<TopicPartition, OffsetAndMetadata> positions(KafkaConsumer<String, String> consumer) {
        Map<TopicPartition, OffsetAndMetadata> positions = new HashMap<>();
        for (TopicPartition partition : consumer.assignment()) {
            positions.put(partition, new OffsetAndMetadata(consumer.position(partition)));
        }
        return positions;
    }

    private void commitOffsets(Map<String, String> options) {
        KafkaConsumer<String, String> consumer = consumer(options);
        Map<TopicPartition, OffsetAndMetadata> positions = positions(consumer);
        consumer.commitSync(positions);
        print(fields("event", "offsets", "how", "commitSync", "offsets", describe(positions)));
    }

    private void sendOffsets(Map<String, String> options) {
        KafkaProducer<String, String> producer = producer(options);
        KafkaConsumer<String, String> consumer = consumer(options);
        Map<TopicPartition, OffsetAndMetadata> positions = positions(consumer);
        producer.sendOffsetsToTransaction(positions, consumer.groupMetadata());
        print(fields("event", "offsets", "how", "sendOffsetsToTransaction",
                "offsets", describe(positions)));
    }

    private void close(Map<String, String> options) {
        String name = required(options, "name");
        KafkaProducer<String, String> producer = producers.remove(name);
        if (producer != null) {
            producer.close(Duration.ofSeconds(5));
        }
        KafkaConsumer<String, String> consumer = consumers.remove(name);
        if (consumer != null) {
            consumer.close(Duration.ofSeconds(5));
        }
        print(fields("event", "closed", "name", name));
    }

    private void closeAll() {
        for (KafkaProducer<String, String> producer : producers.values()) {
            try { producer.close(Duration.ofSeconds(5)); } catch (RuntimeException ignored) { }
        }
        for (KafkaConsumer<String, String> consumer : consumers.values()) {
            try { consumer.close(Duration.ofSeconds(5)); } catch (RuntimeException ignored) { }
        }
    }

    private KafkaProducer<String, String> producer(Map<String, String> options) {
        String name = required(options, "producer");
        KafkaProducer<String, String> producer = producers.get(name);
        if (producer == null) {
            throw new UsageError("no producer named '" + name + "'");
        }
        return producer;
    }

    private KafkaConsumer<String, String> consumer(Map<String, String> options) {
        String name = required(options, "consumer");
        KafkaConsumer<String, String> consumer = consumers.get(name);
        if (consumer == null) {
            throw new UsageError("no consumer named '" + name + "'");
        }
        return consumer;
    }

    private static String required(Map<String, String> options, String key) {
        String value = options.get(key);
        if (value == null) {
            throw new UsageError("missing option '" + key + "'");
        }
        return value;
    }

    private static List<String> list(Map<String, String> options, String key) {
        return Arrays.asList(required(options, key).split(","));
    }

    private static Map<String, Object> describe(Map<TopicPartition, OffsetAndMetadata> offsets) {
        Map<String, Object> described = new LinkedHashMap<>();
        offsets.entrySet().stream()
                .sorted((a, b) -> a.getKey().toString().compareTo(b.getKey().toString()))
                .forEach(entry -> described.put(entry.getKey().toString(), entry.getValue().offset()));
        return described;
    }

    /** An error line: the exception (unwrapped from ExecutionException) and its causes. */
    private static void reportError(String step, Exception error) {
        Throwable shown = error instanceof ExecutionException && error.getCause() != null
                ? error.getCause() : error;
        List<Object> causes = new ArrayList<>();
        for (Throwable cause = shown.getCause(); cause != null && causes.size() < 5; cause = cause.getCause()) {
            causes.add(cause.getClass().getSimpleName() + ": " + cause.getMessage());
        }
        print(fields("event", "error", "step", step, "exception", shown.getClass().getSimpleName(),
                "message", shown.getMessage(), "causes", causes));
    }

    private static void emit(String event, Map<String, String> options) {
        print(fields("event", event, "producer", options.get("producer")));
    }

    private static Map<String, Object> fields(Object... keysAndValues) {
        Map<String, Object> fields = new LinkedHashMap<>();
        for (int i = 0; i < keysAndValues.length; i += 2) {
            fields.put((String) keysAndValues[i], keysAndValues[i + 1]);
        }
        return fields;
    }

    private static void print(Map<String, Object> fields) {
        StringBuilder line = new StringBuilder();
        json(fields, line);
        System.out.println(line);
        System.out.flush();
    }

    private static void json(Object value, StringBuilder out) {
        if (value == null) {
            out.append("null");
        } else if (value instanceof Number || value instanceof Boolean) {
            out.append(value);
        } else if (value instanceof Map<?, ?> map) {
            out.append('{');
            String separator = "";
            for (Map.Entry<?, ?> entry : map.entrySet()) {
                out.append(separator);
                json(entry.getKey().toString(), out);
                out.append(':');
                json(entry.getValue(), out);
                separator = ",";
            }
            out.append('}');
        } else if (value instanceof List<?> items) {
            out.append('[');
            String separator = "";
            for (Object item : items) {
                out.append(separator);
                json(item, out);
                separator = ",";
            }
            out.append(']');
        } else {
            out.append('"');
            for (char c : value.toString().toCharArray()) {
                switch (c) {
                    case '"' -> out.append("\\\"");
                    case '\\' -> out.append("\\\\");
                    case '\n' -> out.append("\\n");
                    case '\r' -> out.append("\\r");
                    case '\t' -> out.append("\\t");
                    default -> {
                        if (c < 0x20) {
                            out.append(String.format("\\u%04x", (int) c));
                        } else {
                            out.append(c);
                        }
                    }
                }
            }
            out.append('"');
        }
    }
}
