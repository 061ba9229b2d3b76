"""LLM providers behind the Metona IR: adapters per wire protocol, presets, stream assembly, error mapping,
retry + failover, provider records with write-only API keys, and the ``providers/*`` / ``chat/*`` methods."""
