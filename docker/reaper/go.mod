module kafka-harness/reaper

go 1.21
