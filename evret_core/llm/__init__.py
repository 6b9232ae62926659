"""The one LLM layer: every judge and evaluator that calls an LLM goes through it.

- :mod:`~evret_core.llm.providers`: :class:`SDKProvider`, the base of providers wrapping a vendor SDK, and HTTP
  status to :class:`LLMCallError` (the provider interface itself is :mod:`evret_core.contracts.provider`);
- :mod:`~evret_core.llm.settings`: :class:`LLMSettings`, the options and defaults of every LLM caller;
- :mod:`~evret_core.llm.client`: :class:`LLMClient`, the one call policy (retries, Retry-After, adaptive
  concurrency, requests- and tokens-per-minute budgets, a shared
  :class:`~evret_core.contracts.executor.InFlightLimiter`), and :func:`gather_all` / :func:`run_all`;
- :mod:`~evret_core.llm.cache`: the persistent answer cache and its one key scheme;
- :mod:`~evret_core.llm.fencing`: untrusted text fenced as data;
- :mod:`~evret_core.llm.injection`: prompt-injection patterns found in judged texts (reported, never acted on);
- :mod:`~evret_core.llm.structured`: :func:`structured_call`, JSON answers validated against a pydantic schema;
- :mod:`~evret_core.llm.choices`: :func:`with_choices`, a schema listing the values a field may take in one call.

Import each name from its module: this package imports nothing, so that loading one of them (a provider plugin
loads :mod:`~evret_core.llm.providers`) does not load pydantic.
"""
