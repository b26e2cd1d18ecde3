import java.util.List;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.metadata.PartitionRecord;
import org.apache.kafka.common.metadata.TopicRecord;
import org.apache.kafka.common.network.ListenerName;
import org.apache.kafka.image.MetadataDelta;
import org.apache.kafka.image.MetadataImage;
import org.apache.kafka.image.MetadataProvenance;
import org.apache.kafka.metadata.KRaftMetadataCache;
import org.apache.kafka.server.common.KRaftVersion;

/**
 * What a broker's metadata cache answers for the leader of a partition it knows that has no
 * leader (ISR empty, leader -1), and for a partition it does not know: the test of the
 * kafka-20734 broker patch runs it with and without the patch's agent.
 */
public class LeaderEndpointProbe {
  public static void main(String[] a) {
    MetadataDelta delta = new MetadataDelta.Builder().setImage(MetadataImage.EMPTY).build();
    Uuid id = Uuid.randomUuid();
    delta.replay(new TopicRecord().setName("t").setTopicId(id));
    delta.replay(new PartitionRecord().setPartitionId(0).setTopicId(id).setReplicas(List.of(1))
        .setIsr(List.of()).setLeader(-1).setLeaderEpoch(1).setPartitionEpoch(1));
    MetadataImage image = delta.apply(MetadataProvenance.EMPTY);
    KRaftMetadataCache cache = new KRaftMetadataCache(1, () -> KRaftVersion.KRAFT_VERSION_1);
    cache.setImage(image);
    ListenerName l = new ListenerName("INTERNAL");
    System.out.println("leaderless " + cache.getPartitionLeaderEndpoint("t", 0, l));
    System.out.println("unknown " + cache.getPartitionLeaderEndpoint("gone", 0, l));
  }
}
