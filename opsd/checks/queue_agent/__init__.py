"""Queue Agent signals: what YTsaurus' Queue Agent says of each query's queue and consumer (write rates, the
consumer's disposition, unread rows, processing lag), exported with the query's labels; where it serves nothing (the
embedded cluster, a cluster without a Queue Agent), opsd's own measurements stand in."""
