"""The offsets checker: what a consumer group's committed offset must satisfy once the group
coordinator acknowledged a commit of it (KAFKA-20634)."""
