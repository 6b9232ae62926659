"""The contracts the core and its plugins share: the errors a user can cause, ``run_sync``, the bases of judges,
retrievers, metrics and output evaluators with the values they exchange, and the bases and value types of the LLM
provider and RAG kinds (generators, perturbations, claim judges, RAG scores) with the data protocols they read, the
executor base, the table of kinds and the hookspecs that register them.

Nothing here imports the rest of evret_core (tests/house/test_contracts_pure.py holds the rule).
"""
