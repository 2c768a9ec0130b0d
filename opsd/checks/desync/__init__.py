"""The desync check: a query's checkpoint against its consumer and queue, per partition — found, explained and,
where it is safe, healed with the source's own compare-and-set advance."""
