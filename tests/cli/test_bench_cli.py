"""``metona-sidecar bench agent --provider <preset id>`` on a fresh data dir: a preset that needs no key is
created under its own id the first time (issue 24: ``--provider local`` answered ``provider 'local' not found``)."""

from __future__ import annotations

import io
from typing import Any

import pytest

from sidecar.cli.bench import ensure_provider
from sidecar.providers.service import ProviderNotFound

pytestmark = pytest.mark.anyio


class Providers:
    def __init__(self, existing: set[str]) -> None:
        self.existing = existing
        self.created: list[dict[str, Any]] = []

    async def get(self, provider_id: str) -> Any:
        if provider_id not in self.existing:
            raise ProviderNotFound(f"provider {provider_id!r} not found")
        return provider_id

    async def create(self, **kwargs: Any) -> Any:
        self.created.append(kwargs)
        self.existing.add(kwargs["provider_id"])


async def test_a_keyless_preset_id_is_created_once() -> None:
    providers, err = Providers(set()), io.StringIO()
    await ensure_provider(providers, "local", err)
    await ensure_provider(providers, "local", err)
    assert providers.created == [{"preset": "local", "provider_id": "local"}]
    assert err.getvalue().count("created from its preset") == 1


@pytest.mark.parametrize("provider_id", ["mock", "openai", "my-own-provider"])
async def test_other_ids_are_left_to_the_runs_own_check(provider_id: str) -> None:
    providers = Providers(set())
    await ensure_provider(providers, provider_id, io.StringIO())
    assert providers.created == []


async def test_a_configured_provider_of_that_id_is_used_as_it_is() -> None:
    providers = Providers({"local"})
    await ensure_provider(providers, "local", io.StringIO())
    assert providers.created == []
