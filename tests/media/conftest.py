"""The knowledge + retrieval environment of tests/retrieval (``env``) for the media service's tests."""

from tests.retrieval.conftest import env, env_factory

__all__ = ["env", "env_factory"]
