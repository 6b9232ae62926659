"""The contracts the core and its plugins share: the errors a user can cause and ``run_sync``.

Nothing here imports the rest of evret_core (tests/house/test_contracts_pure.py holds the rule).
"""
