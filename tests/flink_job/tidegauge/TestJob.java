package tidegauge;

import java.time.Duration;

import org.apache.flink.api.common.eventtime.SerializableTimestampAssigner;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.ReduceFunction;
import org.apache.flink.api.common.functions.RichFilterFunction;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;

/**
 * The deterministic test job of tidegauge's Flink integration tests (compiled at test time with javac
 * against flink-dist; see tests/flink_cluster.py). One mode per job, chosen by the first argument:
 *
 * <ul>
 *   <li>{@code idle}: parallelism 2; a filter drops every record of source subtask 1 before
 *       {@code forBoundedOutOfOrderness(1 s)}, so that subtask never emits a watermark and the window's
 *       input watermark (the min over its channels, StatusWatermarkValve) stays Long.MIN_VALUE.
 *   <li>{@code idle-withidleness}: the same with {@code withIdleness(2 s)}: subtask 1 is marked idle and
 *       the window's watermark advances with subtask 0.
 *   <li>{@code idle-late}: {@code idle-withidleness} (subtask 1 reads records but the filter passes none to
 *       its watermark assigner) with two window vertices ({@code window-2s}, {@code window-4s}) fed the same
 *       stream; records 30 to 80 of every 5th are dated 30 s in the past and dropped as late by both windows
 *       (WindowOperator's numLateRecordsDropped), after which no record is late.
 *   <li>{@code late}: parallelism 1; from record 30 on every 5th record is dated 30 s in the past, beyond
 *       the 2 s window's allowed lateness (1 s): WindowOperator drops it and counts numLateRecordsDropped.
 *   <li>{@code future}: parallelism 1; record 50 is dated 3 h in the future: the watermark jumps there and
 *       every honest record after it is dropped as late.
 *   <li>{@code failing}: parallelism 1; the map throws at record 30 of every attempt; fixed-delay restart
 *       strategy with 2 attempts 1 s apart, so the job restarts twice and then fails.
 * </ul>
 *
 * Records arrive every 100 ms (a sleeping map chained to the source) with event time = processing time
 * plus the mode's offset; keys alternate 0/1. Checkpoints every 1 s.
 */
public final class TestJob {
    private TestJob() {}

    /** Paces the sequence to one record per 100 ms and stamps it; throws in the failing mode. */
    static final class Stamp extends RichMapFunction<Long, Tuple2<Integer, Long>> {
        private final String mode;
        private long seen;

        Stamp(String mode) {
            this.mode = mode;
        }

        @Override
        public Tuple2<Integer, Long> map(Long i) throws Exception {
            Thread.sleep(100);
            seen++;
            long now = System.currentTimeMillis();
            long ts = now;
            if (mode.equals("late") && seen >= 30 && seen % 5 == 0) {
                ts = now - 30_000L;
            } else if (mode.equals("idle-late") && seen >= 30 && seen <= 80 && seen % 5 == 0) {
                ts = now - 30_000L;
            } else if (mode.equals("future") && seen == 50) {
                ts = now + 3L * 3600_000L;
            } else if (mode.equals("failing") && seen == 30) {
                throw new IllegalStateException("tidegauge test failure at record " + seen);
            }
            return Tuple2.of((int) (i % 2), ts);
        }
    }

    /** Drops every record of subtask 1 (a permanently idle channel downstream). */
    static final class DropOnSubtask1 extends RichFilterFunction<Tuple2<Integer, Long>> {
        @Override
        public boolean filter(Tuple2<Integer, Long> value) {
            return getRuntimeContext().getTaskInfo().getIndexOfThisSubtask() != 1;
        }
    }

    /** A keyed tumbling event-time window of {@code seconds} with 1 s allowed lateness, named window-Ns. */
    static DataStream<Tuple2<Integer, Long>> window(DataStream<Tuple2<Integer, Long>> timed, int seconds) {
        return timed
                .keyBy(new KeySelector<Tuple2<Integer, Long>, Integer>() {
                    @Override
                    public Integer getKey(Tuple2<Integer, Long> value) {
                        return value.f0;
                    }
                })
                .window(TumblingEventTimeWindows.of(Duration.ofSeconds(seconds)))
                .allowedLateness(Duration.ofSeconds(1))
                .reduce((ReduceFunction<Tuple2<Integer, Long>>) (a, b) -> Tuple2.of(a.f0, Math.max(a.f1, b.f1)))
                .name("window-" + seconds + "s");
    }

    public static void main(String[] args) throws Exception {
        String mode = args.length > 0 ? args[0] : "idle";
        Configuration conf = new Configuration();
        if (mode.equals("failing")) {
            conf.set(ConfigOptions.key("restart-strategy.type").stringType().noDefaultValue(), "fixed-delay");
            conf.set(ConfigOptions.key("restart-strategy.fixed-delay.attempts").stringType().noDefaultValue(), "2");
            conf.set(ConfigOptions.key("restart-strategy.fixed-delay.delay").stringType().noDefaultValue(), "1 s");
        } else {
            conf.set(ConfigOptions.key("restart-strategy.type").stringType().noDefaultValue(), "none");
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        boolean idleModes = mode.startsWith("idle");
        env.setParallelism(idleModes ? 2 : 1);
        env.enableCheckpointing(1000);

        DataStream<Tuple2<Integer, Long>> stamped = env.fromSequence(0, 1_000_000_000L).name("seq")
                .map(new Stamp(mode)).name("stamp");
        if (idleModes) {
            stamped = stamped.filter(new DropOnSubtask1()).name("drop-on-subtask1");
        }
        WatermarkStrategy<Tuple2<Integer, Long>> strategy = WatermarkStrategy
                .<Tuple2<Integer, Long>>forBoundedOutOfOrderness(Duration.ofSeconds(1))
                .withTimestampAssigner((SerializableTimestampAssigner<Tuple2<Integer, Long>>) (e, t) -> e.f1);
        if (mode.equals("idle-withidleness") || mode.equals("idle-late")) {
            strategy = strategy.withIdleness(Duration.ofSeconds(2));
        }
        DataStream<Tuple2<Integer, Long>> timed = stamped.assignTimestampsAndWatermarks(strategy);
        window(timed, 2).sinkTo(new DiscardingSink<>()).name("discard");
        if (mode.equals("idle-late")) {
            window(timed, 4).sinkTo(new DiscardingSink<>()).name("discard-4s");
        }
        env.execute("tg-" + mode);
    }
}
