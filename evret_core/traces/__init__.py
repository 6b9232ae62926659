"""Agent traces: every retrieve hop of an agent run scored as a query (:mod:`evret_core.traces.hops`), and each run's
outcome and the aggregates over runs (:mod:`evret_core.traces.outcomes`)."""
