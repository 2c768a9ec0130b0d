"""The batch phases check: where each pipeline's recent batches spent their time (`opsd.observe.phases`)."""
