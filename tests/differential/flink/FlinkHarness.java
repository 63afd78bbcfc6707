// Differential-test harness: runs seeded scenarios through a real Flink (flink-dist from PyPI's
// apache-flink-libraries) in one JVM, a local MiniCluster, one job per chunk of scenarios.
//
// Per scenario: fromData(steps) -> assignTimestampsAndWatermarks(split-multiplexing strategy) ->
// filter(data) -> keyBy(key) -> window(assigner) -> allowedLateness -> [sideOutputLateData] ->
// trigger(EventTimeTrigger, tagged) -> count. Periodic emission is driven by tick records placed by
// the Python side at the scenario's deterministic schedule (pipeline.auto-watermark-interval = 0
// disables Flink's own timer), so the run is reproducible. The per-split wiring mirrors
// ProgressiveTimestampsAndWatermarks: onEvent -> the multiplexer's immediate output, onPeriodicEmit ->
// its deferred output, then WatermarkOutputMultiplexer.onPeriodicEmit(). The generators
// (BoundedOutOfOrdernessWatermarks, WatermarksWithIdleness with a manual clock), the multiplexer,
// TimestampsAndWatermarksOperator, the WindowOperator, EventTimeTrigger, the assigners and the metric
// numLateRecordsDropped are Flink's own.
//
// Input (argv[0]): lines
//   S id kind(T|S|G) size slide gap lateness delay idleness(-1 none) perEvent sideOutput nPartitions
//   E row ts partition key arrival        (an event, in processing order)
//   K time                                (a periodic tick at processing time `time`)
// Output (stdout): F id key start end count watermark late(0|1) / L id row / D id numLateRecordsDropped
//   / X id message (the scenario failed) / OK id

import java.io.BufferedReader;
import java.io.FileReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;

import org.apache.flink.api.common.eventtime.BoundedOutOfOrdernessWatermarks;
import org.apache.flink.api.common.eventtime.TimestampAssigner;
import org.apache.flink.api.common.eventtime.TimestampAssignerSupplier;
import org.apache.flink.api.common.eventtime.WatermarkGenerator;
import org.apache.flink.api.common.eventtime.WatermarkGeneratorSupplier;
import org.apache.flink.api.common.eventtime.WatermarkOutput;
import org.apache.flink.api.common.eventtime.WatermarkOutputMultiplexer;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.eventtime.WatermarksWithIdleness;
import org.apache.flink.api.common.functions.FilterFunction;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.Metric;
import org.apache.flink.metrics.MetricConfig;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.metrics.reporter.MetricReporter;
import org.apache.flink.metrics.reporter.MetricReporterFactory;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.datastream.WindowedStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.assigners.EventTimeSessionWindows;
import org.apache.flink.streaming.api.windowing.assigners.SlidingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.assigners.WindowAssigner;
import org.apache.flink.streaming.api.windowing.triggers.EventTimeTrigger;
import org.apache.flink.streaming.api.windowing.triggers.Trigger;
import org.apache.flink.streaming.api.windowing.triggers.TriggerResult;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;
import org.apache.flink.util.clock.RelativeClock;

public class FlinkHarness {

    static final ConcurrentLinkedQueue<String> OUT = new ConcurrentLinkedQueue<>();
    static final Map<String, Counter> DROPPED = new ConcurrentHashMap<>();
    static final String DEBUG = System.getProperty("harness.debug");
    static final ThreadLocal<boolean[]> LATE_FIRE = ThreadLocal.withInitial(() -> new boolean[1]);

    /** Captures each window operator's numLateRecordsDropped counter, by operator name. */
    public static class CaptureReporter implements MetricReporter {
        @Override public void open(MetricConfig config) {}
        @Override public void close() {}
        @Override public void notifyOfAddedMetric(Metric metric, String name, MetricGroup group) {
            if ("numLateRecordsDropped".equals(name) && metric instanceof Counter) {
                String op = group.getAllVariables().get("<operator_name>");
                if (op != null) DROPPED.put(op, (Counter) metric);
            }
        }
        @Override public void notifyOfRemovedMetric(Metric metric, String name, MetricGroup group) {}
    }

    public static class CaptureReporterFactory implements MetricReporterFactory {
        @Override public MetricReporter createMetricReporter(Properties properties) {
            return new CaptureReporter();
        }
    }

    static final class ManualClock implements RelativeClock, java.io.Serializable {
        long nanos;
        @Override public long relativeTimeMillis() { return nanos / 1_000_000L; }
        @Override public long relativeTimeNanos() { return nanos; }
    }

    /** A punctuated bounded-out-of-orderness generator: emits max - delay - 1 on every event. */
    static final class PerEventBounded extends BoundedOutOfOrdernessWatermarks<long[]> {
        PerEventBounded(Duration d) { super(d); }
        @Override public void onEvent(long[] e, long ts, WatermarkOutput out) {
            super.onEvent(e, ts, out);
            super.onPeriodicEmit(out);
        }
        @Override public void onPeriodicEmit(WatermarkOutput out) {}
    }

    /** One generator per split behind a WatermarkOutputMultiplexer, ticked by tick records. */
    static final class SplitGenerator implements WatermarkGenerator<long[]> {
        final long delay, idleness; final boolean perEvent; final int parts;
        final ManualClock clock = new ManualClock();
        WatermarkOutputMultiplexer mux;
        List<WatermarkGenerator<long[]>> gens;
        SplitGenerator(long delay, long idleness, boolean perEvent, int parts) {
            this.delay = delay; this.idleness = idleness; this.perEvent = perEvent; this.parts = parts;
        }
        void init(WatermarkOutput out0) {
            if (mux != null) return;
            WatermarkOutput out = out0;
            if (DEBUG != null) {  // -Dharness.debug=<scenario id>: log what the multiplexer emits
                out = new WatermarkOutput() {
                    @Override public void emitWatermark(org.apache.flink.api.common.eventtime.Watermark w) {
                        System.out.println("# " + DEBUG + " t=" + clock.relativeTimeMillis() + " wm " + w.getTimestamp());
                        out0.emitWatermark(w);
                    }
                    @Override public void markIdle() {
                        System.out.println("# " + DEBUG + " t=" + clock.relativeTimeMillis() + " idle");
                        out0.markIdle();
                    }
                    @Override public void markActive() { out0.markActive(); }
                };
            }
            mux = new WatermarkOutputMultiplexer(out);
            gens = new ArrayList<>();
            for (int p = 0; p < parts; p++) {
                mux.registerNewOutput("p" + p);
                WatermarkGenerator<long[]> g = perEvent
                        ? new PerEventBounded(Duration.ofMillis(delay))
                        : new BoundedOutOfOrdernessWatermarks<>(Duration.ofMillis(delay));
                if (idleness > 0) g = new WatermarksWithIdleness<>(g, Duration.ofMillis(idleness), clock);
                gens.add(g);
            }
        }
        @Override public void onEvent(long[] r, long ts, WatermarkOutput out) {
            init(out);
            clock.nanos = r[5] * 1_000_000L;
            if (r[0] == 1) {
                for (int p = 0; p < parts; p++) gens.get(p).onPeriodicEmit(deferred(p));
                mux.onPeriodicEmit();
            } else {
                int p = (int) r[3];
                gens.get(p).onEvent(r, ts, mux.getImmediateOutput("p" + p));
            }
        }
        @Override public void onPeriodicEmit(WatermarkOutput out) {}

        WatermarkOutput deferred(int p) {
            final WatermarkOutput d = mux.getDeferredOutput("p" + p);
            if (DEBUG == null) return d;
            return new WatermarkOutput() {
                @Override public void emitWatermark(org.apache.flink.api.common.eventtime.Watermark w) { d.emitWatermark(w); }
                @Override public void markIdle() {
                    System.out.println("# " + DEBUG + " t=" + clock.relativeTimeMillis() + " p" + p + " idle");
                    d.markIdle();
                }
                @Override public void markActive() { d.markActive(); }
            };
        }
    }

    static final class Strategy implements WatermarkStrategy<long[]> {
        final long delay, idleness; final boolean perEvent; final int parts;
        Strategy(long delay, long idleness, boolean perEvent, int parts) {
            this.delay = delay; this.idleness = idleness; this.perEvent = perEvent; this.parts = parts;
        }
        @Override public WatermarkGenerator<long[]> createWatermarkGenerator(WatermarkGeneratorSupplier.Context c) {
            return new SplitGenerator(delay, idleness, perEvent, parts);
        }
        @Override public TimestampAssigner<long[]> createTimestampAssigner(TimestampAssignerSupplier.Context c) {
            return (r, prev) -> r[2];
        }
    }

    /** EventTimeTrigger, remembering whether a FIRE came from an element (a late firing). */
    static final class TaggedTrigger extends Trigger<Object, TimeWindow> {
        final EventTimeTrigger d = EventTimeTrigger.create();
        @Override public TriggerResult onElement(Object e, long ts, TimeWindow w, TriggerContext ctx) throws Exception {
            TriggerResult r = d.onElement(e, ts, w, ctx);
            LATE_FIRE.get()[0] = r.isFire();
            return r;
        }
        @Override public TriggerResult onEventTime(long t, TimeWindow w, TriggerContext ctx) {
            LATE_FIRE.get()[0] = false;
            return d.onEventTime(t, w, ctx);
        }
        @Override public TriggerResult onProcessingTime(long t, TimeWindow w, TriggerContext ctx) throws Exception {
            return d.onProcessingTime(t, w, ctx);
        }
        @Override public void clear(TimeWindow w, TriggerContext ctx) throws Exception { d.clear(w, ctx); }
        @Override public boolean canMerge() { return d.canMerge(); }
        @Override public void onMerge(TimeWindow w, OnMergeContext ctx) { d.onMerge(w, ctx); }
    }

    static final class Count extends ProcessWindowFunction<long[], String, Long, TimeWindow> {
        final String id;
        Count(String id) { this.id = id; }
        @Override public void process(Long key, Context ctx, Iterable<long[]> els, Collector<String> out) {
            long n = 0;
            for (long[] ignored : els) n++;
            OUT.add("F " + id + " " + key + " " + ctx.window().getStart() + " " + ctx.window().getEnd() + " " + n
                    + " " + ctx.currentWatermark() + " " + (LATE_FIRE.get()[0] ? 1 : 0));
        }
    }

    static final class Scenario {
        String id; String kind; long size, slide, gap, lateness, delay, idleness; boolean perEvent, side; int parts;
        List<long[]> steps = new ArrayList<>();
    }

    static void build(StreamExecutionEnvironment env, Scenario s) {
        DataStream<long[]> in = env.fromData(s.steps, PrimitiveArrayTypeInfo.LONG_PRIMITIVE_ARRAY_TYPE_INFO)
                .name("src-" + s.id).setParallelism(1);
        DataStream<long[]> data = in.assignTimestampsAndWatermarks(new Strategy(s.delay, s.idleness, s.perEvent, s.parts))
                .filter((FilterFunction<long[]>) r -> r[0] == 0);
        WindowAssigner<Object, TimeWindow> assigner;
        if (s.kind.equals("T")) assigner = TumblingEventTimeWindows.of(Duration.ofMillis(s.size));
        else if (s.kind.equals("S")) assigner = SlidingEventTimeWindows.of(Duration.ofMillis(s.size), Duration.ofMillis(s.slide));
        else assigner = EventTimeSessionWindows.withGap(Duration.ofMillis(s.gap));
        WindowedStream<long[], Long, TimeWindow> w = data.keyBy((KeySelector<long[], Long>) r -> r[4])
                .window(assigner).allowedLateness(Duration.ofMillis(s.lateness)).trigger(new TaggedTrigger());
        final OutputTag<long[]> tag = new OutputTag<long[]>("late-" + s.id, PrimitiveArrayTypeInfo.LONG_PRIMITIVE_ARRAY_TYPE_INFO) {};
        if (s.side) w = w.sideOutputLateData(tag);
        SingleOutputStreamOperator<String> res = w.process(new Count(s.id)).name("win-" + s.id);
        res.sinkTo(new DiscardingSink<>());
        if (s.side) {
            final String id = s.id;
            res.getSideOutput(tag).process(new ProcessFunction<long[], String>() {
                @Override public void processElement(long[] r, Context c, Collector<String> o) {
                    OUT.add("L " + id + " " + r[1]);
                }
            }).sinkTo(new DiscardingSink<>());
        }
    }

    static void run(List<Scenario> chunk) throws Exception {
        Configuration conf = new Configuration();
        conf.set(PipelineOptions.AUTO_WATERMARK_INTERVAL, Duration.ZERO);
        conf.set(TaskManagerOptions.NETWORK_MEMORY_MIN, MemorySize.parse("256m"));
        conf.set(TaskManagerOptions.NETWORK_MEMORY_MAX, MemorySize.parse("256m"));
        conf.setString("metrics.reporter.capture.factory.class", CaptureReporterFactory.class.getName());
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(1, conf);
        for (Scenario s : chunk) build(env, s);
        env.execute("tidegauge-differential");
    }

    static void flush(List<Scenario> chunk) {
        String line;
        while ((line = OUT.poll()) != null) System.out.println(line);
        for (Scenario s : chunk) {
            Counter c = DROPPED.get("win-" + s.id);
            System.out.println("D " + s.id + " " + (c == null ? -1 : c.getCount()));
            System.out.println("OK " + s.id);
        }
        DROPPED.clear();
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        List<Scenario> all = new ArrayList<>();
        Scenario cur = null;
        try (BufferedReader br = new BufferedReader(new FileReader(args[0]))) {
            String line;
            while ((line = br.readLine()) != null) {
                String[] f = line.trim().split(" ");
                if (f[0].equals("S")) {
                    cur = new Scenario();
                    cur.id = f[1]; cur.kind = f[2]; cur.size = Long.parseLong(f[3]); cur.slide = Long.parseLong(f[4]);
                    cur.gap = Long.parseLong(f[5]); cur.lateness = Long.parseLong(f[6]); cur.delay = Long.parseLong(f[7]);
                    cur.idleness = Long.parseLong(f[8]); cur.perEvent = f[9].equals("1"); cur.side = f[10].equals("1");
                    cur.parts = Integer.parseInt(f[11]);
                    all.add(cur);
                } else if (f[0].equals("E")) {
                    cur.steps.add(new long[] {0, Long.parseLong(f[1]), Long.parseLong(f[2]), Long.parseLong(f[3]),
                            Long.parseLong(f[4]), Long.parseLong(f[5])});
                } else if (f[0].equals("K")) {
                    long t = Long.parseLong(f[1]);
                    cur.steps.add(new long[] {1, -1, t, 0, 0, t});
                }
            }
        }
        int chunkSize = args.length > 1 ? Integer.parseInt(args[1]) : 25;
        for (int i = 0; i < all.size(); i += chunkSize) {
            List<Scenario> chunk = all.subList(i, Math.min(all.size(), i + chunkSize));
            try {
                run(chunk);
                flush(chunk);
            } catch (Exception e) {
                OUT.clear();
                DROPPED.clear();
                for (Scenario s : chunk) {  // isolate the failing scenario(s)
                    try {
                        run(List.of(s));
                        flush(List.of(s));
                    } catch (Exception e2) {
                        OUT.clear();
                        Throwable t = e2;
                        while (t.getCause() != null) t = t.getCause();
                        System.out.println("X " + s.id + " " + String.valueOf(t).replace('\n', ' '));
                    }
                }
            }
        }
        System.exit(0);
    }
}
