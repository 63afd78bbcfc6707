package tidegauge;

import java.time.Duration;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.ReduceFunction;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;

/**
 * The split-level watermark test job (tests/flink_split_record.py, issue 17 section 3): a KafkaSource
 * (flink-connector-kafka, from Maven Central) reads one topic of four partitions from the earliest offset with
 * parallelism 2, so each source subtask reads two partitions (two splits). The event time is the record
 * timestamp (KafkaRecordEmitter) and the watermark forBoundedOutOfOrderness(1 s): the recorder dates the
 * records of one partition ten minutes in the past, so that split holds its subtask's (and the job's)
 * minimum watermark. A 2 s window keyed on nothing follows (its own vertex), then a discarding sink.
 *
 * <p>Mode {@code align} adds {@code withWatermarkAlignment("tg-align", 5 s, 200 ms)}: the splits more than
 * 5 s ahead of the group's minimum (the lagging partition) are paused by watermark alignment (FLIP-182,
 * split-level FLIP-217); Flink 2.1+ reports it per split as {@code pausedTimeMsPerSecond} (FLIP-513).
 *
 * <p>Arguments: bootstrap servers, topic, mode ({@code lag} or {@code align}).
 */
public final class KafkaSplitsJob {
    private KafkaSplitsJob() {}

    public static void main(String[] args) throws Exception {
        String mode = args.length > 2 ? args[2] : "lag";
        Configuration conf = new Configuration();
        conf.set(ConfigOptions.key("restart-strategy.type").stringType().noDefaultValue(), "none");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(2);
        KafkaSource<String> source = KafkaSource.<String>builder()
                .setBootstrapServers(args[0])
                .setTopics(args[1])
                .setGroupId("tg-flink-splits-" + mode)
                .setStartingOffsets(OffsetsInitializer.earliest())
                .setValueOnlyDeserializer(new SimpleStringSchema())
                .build();
        WatermarkStrategy<String> strategy = WatermarkStrategy.forBoundedOutOfOrderness(Duration.ofSeconds(1));
        if (mode.equals("align")) {
            strategy = strategy.withWatermarkAlignment("tg-align", Duration.ofSeconds(5), Duration.ofMillis(200));
        } else if (!mode.equals("lag")) {
            throw new IllegalArgumentException("mode must be lag or align: " + mode);
        }
        env.fromSource(source, strategy, "kafka-in")
                .keyBy(new KeySelector<String, Integer>() {
                    @Override
                    public Integer getKey(String value) {
                        return 0;
                    }
                })
                .window(TumblingEventTimeWindows.of(Duration.ofSeconds(2)))
                .reduce((ReduceFunction<String>) (a, b) -> b)
                .name("window-2s")
                .setParallelism(1)
                .sinkTo(new DiscardingSink<>()).name("discard").setParallelism(1);
        env.execute("tg-kafka-splits-" + mode);
    }
}
