"""The trim forecast: per partition, the time until the queue's trimming deletes rows the query has not read."""
