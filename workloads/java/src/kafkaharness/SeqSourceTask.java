package kafkaharness;

import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;
import org.apache.kafka.connect.source.TransactionContext;

/**
 * One task of {@link SeqSourceConnector}: consecutive seqnos of its own source partition, at
 * a steady rate, each record's source offset its seqno.
 *
 * <p>A task that starts goes on after its committed source offset, so the records of a task
 * are 0..n with no gap and no repeat exactly when the worker commits records and offsets
 * together: the property the connect checks judge. {@code writer} names this task instance
 * (worker pid and a nonce), so a zombie instance's late write is told from its successor's.
 *
 * <p>With {@code seq.journal.dir} set, the instance also keeps a journal of its own (one JSON
 * line per event, written through at once): where it started, what each poll handed over and
 * which seqnos Connect confirmed through {@link #commitRecord}. Connect confirms a record only
 * after the transaction that carried it committed (or, at-least-once, after the brokers
 * acknowledged it), so a confirmed seqno missing from the topic is loss the brokers admitted
 * to; the harness tails the journals into the history.
 */
public class SeqSourceTask extends SourceTask {
  private int task;
  private String topic;
  private String writer;
  private long next;
  private int batch;
  private long periodNanos;
  private long due;
  private int txnRecords;
  private int sinceBoundary;
  private Map<String, Integer> partition;
  private FileOutputStream journalOut;
  /** Confirmed seqnos not yet journaled, as a run: first..last (first > last: none). */
  private long confirmedFirst = 0;
  private long confirmedLast = -1;

  @Override
  public String version() {
    return "1";
  }

  @Override
  public void start(Map<String, String> props) {
    task = Integer.parseInt(props.get(SeqSourceConnector.TASK_ID));
    topic = props.get(SeqSourceConnector.TOPIC);
    batch = Integer.parseInt(props.getOrDefault(SeqSourceConnector.BATCH, "10"));
    double rate = Double.parseDouble(props.getOrDefault(SeqSourceConnector.RATE, "200"));
    periodNanos = (long) (batch * 1e9 / rate);
    txnRecords = Integer.parseInt(props.getOrDefault(SeqSourceConnector.TXN_RECORDS, "25"));
    partition = Map.of("task", task);
    Map<String, Object> offset = context.offsetStorageReader().offset(partition);
    next = offset == null ? 0 : ((Number) offset.get("seqno")).longValue() + 1;
    writer = ProcessHandle.current().pid() + "#" + String.format("%08x", new SecureRandom().nextInt());
    due = System.nanoTime();
    String dir = props.getOrDefault(SeqSourceConnector.JOURNAL_DIR, "");
    if (!dir.isEmpty()) {
      try {
        String name = task + "-" + writer.replace('#', '-') + ".jsonl";
        journalOut = new FileOutputStream(Path.of(dir, name).toFile(), true);
      } catch (IOException e) {
        throw new org.apache.kafka.connect.errors.ConnectException("journal: " + e, e);
      }
      journal("\"e\":\"start\",\"task\":" + task + ",\"writer\":\"" + writer + "\",\"from\":" + next);
    }
  }

  /** One journal line, written through (a kill tears at most the line being written). */
  private synchronized void journal(String fields) {
    if (journalOut == null) {
      return;
    }
    String line = "{" + fields + ",\"ms\":" + System.currentTimeMillis() + "}\n";
    try {
      journalOut.write(line.getBytes(StandardCharsets.UTF_8));
    } catch (IOException e) {
      // The journal is evidence, not the task's job: a full disk must not fail the task.
      journalOut = null;
    }
  }

  private synchronized void flushConfirmed() {
    if (confirmedFirst <= confirmedLast) {
      journal("\"e\":\"committed\",\"seqnos\":[[" + confirmedFirst + "," + confirmedLast + "]]");
      confirmedLast = confirmedFirst - 1;
    }
  }

  @Override
  public synchronized void commitRecord(SourceRecord record, RecordMetadata metadata) {
    if (journalOut == null || metadata == null) {
      return;  // null metadata: the record was filtered out, nothing reached Kafka
    }
    long seqno = ((Number) record.sourceOffset().get("seqno")).longValue();
    if (confirmedFirst <= confirmedLast && seqno == confirmedLast + 1) {
      confirmedLast = seqno;
      return;
    }
    flushConfirmed();
    confirmedFirst = seqno;
    confirmedLast = seqno;
  }

  @Override
  public void commit() {
    flushConfirmed();
  }

  @Override
  public List<SourceRecord> poll() throws InterruptedException {
    long wait = due - System.nanoTime();
    if (wait > 0) {
      // Short sleeps: poll must return often so that a stop is not held up.
      Thread.sleep(Math.min(100, wait / 1_000_000 + 1));
      if (due - System.nanoTime() > 0) {
        return null;
      }
    }
    due += periodNanos;
    TransactionContext txn = context.transactionContext();
    List<SourceRecord> out = new ArrayList<>(batch);
    for (int i = 0; i < batch; i++) {
      long seqno = next++;
      String value =
          "{\"task\":" + task + ",\"seqno\":" + seqno + ",\"writer\":\"" + writer + "\"}";
      SourceRecord record =
          new SourceRecord(
              partition,
              Map.of("seqno", seqno),
              topic,
              null,
              Schema.STRING_SCHEMA,
              Integer.toString(task),
              Schema.STRING_SCHEMA,
              value);
      out.add(record);
      if (txn != null && ++sinceBoundary >= txnRecords) {
        txn.commitTransaction(record);
        sinceBoundary = 0;
      }
    }
    flushConfirmed();
    journal("\"e\":\"polled\",\"seqnos\":[[" + (next - batch) + "," + (next - 1) + "]]");
    return out;
  }

  @Override
  public void stop() {
    flushConfirmed();
    journal("\"e\":\"stop\"");
  }
}
