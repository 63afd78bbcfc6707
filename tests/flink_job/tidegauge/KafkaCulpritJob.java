package tidegauge;

import java.time.Duration;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
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
 * The Kafka test job of the Flink culprit test (tests/integration/test_flink_kafka_culprit.py): a
 * KafkaSource (flink-connector-kafka, from Maven Central) reads one topic from the earliest offset with
 * parallelism 1; the event time is the record timestamp (KafkaRecordEmitter) and the watermark
 * forBoundedOutOfOrderness(1 s), so one record dated 2099 moves the source's watermark to 2099. A 2 s
 * window keyed on nothing follows (its own vertex), then a discarding sink.
 *
 * <p>Arguments: bootstrap servers, topic.
 */
public final class KafkaCulpritJob {
    private KafkaCulpritJob() {}

    public static void main(String[] args) throws Exception {
        Configuration conf = new Configuration();
        conf.set(ConfigOptions.key("restart-strategy.type").stringType().noDefaultValue(), "none");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(1);
        env.enableCheckpointing(1000);
        KafkaSource<String> source = KafkaSource.<String>builder()
                .setBootstrapServers(args[0])
                .setTopics(args[1])
                .setGroupId("tg-flink-culprit")
                .setStartingOffsets(OffsetsInitializer.earliest())
                .setValueOnlyDeserializer(new SimpleStringSchema())
                .build();
        env.fromSource(source, WatermarkStrategy.<String>forBoundedOutOfOrderness(Duration.ofSeconds(1)), "kafka-in")
                .map((MapFunction<String, String>) v -> v).name("parse")
                .keyBy(new KeySelector<String, Integer>() {
                    @Override
                    public Integer getKey(String value) {
                        return 0;
                    }
                })
                .window(TumblingEventTimeWindows.of(Duration.ofSeconds(2)))
                .reduce((ReduceFunction<String>) (a, b) -> b)
                .name("window-2s")
                .sinkTo(new DiscardingSink<>()).name("discard");
        env.execute("tg-kafka-culprit");
    }
}
