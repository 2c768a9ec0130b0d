"""The positions collector: once per cycle, each query's checkpoint, consumer offsets and queue counters, read into
one frozen `opsd.observe.positions.QueryPositions` that the desync, lag, OOM and tuning checks all evaluate."""
