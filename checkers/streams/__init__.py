"""The streams checker: what a Kafka Streams application's final reads must satisfy."""
