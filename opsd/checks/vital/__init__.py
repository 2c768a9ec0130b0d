"""The vital-consumer audit: consumers registered as vital for the queues the queries read (theirs or another job's)
that stand still while rows wait, holding back the queue's trimming for every reader."""
