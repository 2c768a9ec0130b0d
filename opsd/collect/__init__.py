"""What opsd reads of the world for the checks: the positions collector (`positions`), once per cycle each query's
checkpoint, consumer offsets, queue counters and retention, read into one frozen `opsd.results.positions` reading
that every position check evaluates."""
