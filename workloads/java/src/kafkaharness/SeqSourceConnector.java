package kafkaharness;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.source.ConnectorTransactionBoundaries;
import org.apache.kafka.connect.source.ExactlyOnceSupport;
import org.apache.kafka.connect.source.SourceConnector;

/**
 * The connect workload's source connector: task {@code t} writes seqnos 0, 1, 2, ... of
 * source partition {@code {"task": t}} (see docs/history-format.md, workload "connect").
 *
 * <p>It is the project's own rather than Kafka's VerifiableSourceConnector because that one
 * does not declare exactly-once support (so {@code exactly.once.support=required} refuses it)
 * and cannot define transaction boundaries; this one can, so every boundary mode is tested.
 */
public class SeqSourceConnector extends SourceConnector {
  static final String TOPIC = "topic";
  static final String RATE = "seq.rate";
  static final String BATCH = "seq.batch";
  static final String TXN_RECORDS = "seq.txn.records";
  static final String TASK_ID = "seq.task.id";
  static final String JOURNAL_DIR = "seq.journal.dir";

  private Map<String, String> props = new HashMap<>();

  @Override
  public void start(Map<String, String> props) {
    this.props = new HashMap<>(props);
  }

  @Override
  public Class<? extends Task> taskClass() {
    return SeqSourceTask.class;
  }

  @Override
  public List<Map<String, String>> taskConfigs(int maxTasks) {
    List<Map<String, String>> out = new ArrayList<>();
    for (int t = 0; t < maxTasks; t++) {
      Map<String, String> one = new HashMap<>(props);
      one.put(TASK_ID, Integer.toString(t));
      out.add(one);
    }
    return out;
  }

  @Override
  public void stop() {}

  @Override
  public ConfigDef config() {
    return new ConfigDef()
        .define(TOPIC, ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "data topic")
        .define(RATE, ConfigDef.Type.DOUBLE, 200.0, ConfigDef.Importance.LOW,
            "records per second per task")
        .define(BATCH, ConfigDef.Type.INT, 10, ConfigDef.Importance.LOW, "records per poll")
        .define(TXN_RECORDS, ConfigDef.Type.INT, 25, ConfigDef.Importance.LOW,
            "records per transaction when transaction.boundary=connector")
        .define(JOURNAL_DIR, ConfigDef.Type.STRING, "", ConfigDef.Importance.LOW,
            "directory of the tasks' journals (what each polled and had committed); empty: none");
  }

  @Override
  public String version() {
    return "1";
  }

  @Override
  public ExactlyOnceSupport exactlyOnceSupport(Map<String, String> props) {
    return ExactlyOnceSupport.SUPPORTED;
  }

  @Override
  public ConnectorTransactionBoundaries canDefineTransactionBoundaries(Map<String, String> props) {
    return ConnectorTransactionBoundaries.SUPPORTED;
  }
}
