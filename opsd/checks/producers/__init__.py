"""The producers check: what the `yt` sink's producer mode leaves in the cluster (`streaming_core.sink_producer`) —
the query's sessions, their epoch bumps, rows skipped as written before, zombie attempts fenced off — evaluated per
pipeline that writes through a queue producer."""
