// The Apache Kafka Java producer (kafka-clients 3.9.1) as a benchmark client for
// benchmarks/transactions.py --client java: the same workload as clients.produce and
// clients.transactional_produce, in a JVM of its own.
//
//   java -cp <jars>:<classes> ProducerBench BOOTSTRAP TOPIC MODE COUNT VALUE_BYTES PER_TXN
//        WARMUP_TOPIC WARMUP_COUNT [ACKS]
//
// MODE is plain (ACKS, default all; no idempotence), idempotent, or transactional (commit every
// PER_TXN records, each commitTransaction timed). WARMUP_COUNT records go to WARMUP_TOPIC
// first, in the same mode, untimed, so that the JIT has compiled the send path before the
// timed run. batch.size and linger.ms come from the system properties bench.batch.size and
// bench.linger.ms (defaults 1000000 and 10; the value "client" leaves the client's own
// default, 16384 and 0 in kafka-clients 3.9). Prints one JSON line: messages, seconds,
// mb_per_s, client_cpu_seconds, failures, window (wall-clock start and end, s), and
// commit_ms (transactional only).

import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class ProducerBench {
    private ProducerBench() {}

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], mode = args[2];
        int count = Integer.parseInt(args[3]), valueBytes = Integer.parseInt(args[4]);
        int perTxn = Integer.parseInt(args[5]);
        String warmupTopic = args[6];
        int warmupCount = Integer.parseInt(args[7]);
        String acks = args.length > 8 ? args[8] : "all";

        byte[] value = new byte[valueBytes];
        new Random().nextBytes(value);
        AtomicLong failures = new AtomicLong();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(settings(bootstrap, mode, acks))) {
            if (mode.equals("transactional")) {
                producer.initTransactions();
            }
            run(producer, warmupTopic, mode, warmupCount, perTxn, value, failures, null);
            failures.set(0);
            List<Double> commits = new ArrayList<>();
            long cpuStart = cpuNanos();
            long wallStart = System.currentTimeMillis();
            long start = System.nanoTime();
            run(producer, topic, mode, count, perTxn, value, failures, commits);
            double seconds = (System.nanoTime() - start) / 1e9;
            double cpu = (cpuNanos() - cpuStart) / 1e9;
            long wallEnd = System.currentTimeMillis();
            StringBuilder out = new StringBuilder();
            out.append("{\"messages\": ").append(count)
               .append(", \"value_bytes\": ").append(valueBytes)
               .append(", \"seconds\": ").append(seconds)
               .append(", \"msgs_per_s\": ").append(count / seconds)
               .append(", \"mb_per_s\": ").append((double) count * valueBytes / 1e6 / seconds)
               .append(", \"client_cpu_seconds\": ").append(cpu)
               .append(", \"failures\": ").append(failures.get())
               .append(", \"window\": [").append(wallStart / 1e3).append(", ")
               .append(wallEnd / 1e3).append("]");
            if (mode.equals("transactional")) {
                out.append(", \"transactions\": ").append(commits.size()).append(", \"commit_ms\": [");
                for (int i = 0; i < commits.size(); i++) {
                    out.append(i == 0 ? "" : ", ").append(commits.get(i));
                }
                out.append("]");
            }
            System.out.println(out.append("}"));
        }
    }

    private static Properties settings(String bootstrap, String mode, String acks) {
        Properties settings = new Properties();
        settings.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        settings.put(ProducerConfig.ACKS_CONFIG, acks);
        String linger = System.getProperty("bench.linger.ms", "10");
        String batchSize = System.getProperty("bench.batch.size", "1000000");
        if (!linger.equals("client")) {
            settings.put(ProducerConfig.LINGER_MS_CONFIG, linger);
        }
        if (!batchSize.equals("client")) {
            settings.put(ProducerConfig.BATCH_SIZE_CONFIG, batchSize);
        }
        settings.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "none");
        settings.put(ProducerConfig.BUFFER_MEMORY_CONFIG, String.valueOf(256L << 20));
        settings.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, String.valueOf(!mode.equals("plain")));
        if (mode.equals("transactional")) {
            settings.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "bench-java-" + ProcessHandle.current().pid());
        }
        settings.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        settings.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return settings;
    }

    private static void run(KafkaProducer<byte[], byte[]> producer, String topic, String mode,
                            int count, int perTxn, byte[] value, AtomicLong failures,
                            List<Double> commits) {
        boolean transactional = mode.equals("transactional");
        for (int first = 0; first < count; first += perTxn) {
            if (transactional) {
                producer.beginTransaction();
            }
            int last = Math.min(count, first + (transactional ? perTxn : count));
            for (int number = first; number < last; number++) {
                producer.send(new ProducerRecord<>(topic, 0, null, value), (metadata, error) -> {
                    if (error != null) {
                        failures.incrementAndGet();
                    }
                });
            }
            if (transactional) {
                long began = System.nanoTime();
                producer.commitTransaction();
                if (commits != null) {
                    commits.add((System.nanoTime() - began) / 1e6);
                }
            } else {
                first = count;  // one pass
            }
        }
        producer.flush();
    }

    private static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean)
                ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
    }
}
