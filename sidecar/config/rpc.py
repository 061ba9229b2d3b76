"""``config/get``, ``config/update``, ``config/secret/set``, ``config/secret/delete``."""

from __future__ import annotations

from typing import Any

from ..ipc.context import RequestContext
from ..ipc.router import Method
from .models import (
    ConfigGetParams,
    ConfigResult,
    ConfigUpdateParams,
    SecretDeleteParams,
    SecretResult,
    SecretSetParams,
    SecretState,
)
from .service import ConfigService


def methods(config: ConfigService) -> list[Method[Any, Any]]:
    async def result(keys: list[str] | None = None) -> ConfigResult:
        values, secrets = await config.values(keys)
        return ConfigResult(values=values, secrets={k: SecretState(configured=v) for k, v in secrets.items()})

    async def get(ctx: RequestContext, p: ConfigGetParams) -> ConfigResult:
        return await result(p.keys)

    async def update(ctx: RequestContext, p: ConfigUpdateParams) -> ConfigResult:
        await config.update(p.values)
        return await result()

    async def secret_set(ctx: RequestContext, p: SecretSetParams) -> SecretResult:
        await config.set_secret(p.key, p.value)
        return SecretResult(key=p.key, configured=True)

    async def secret_delete(ctx: RequestContext, p: SecretDeleteParams) -> SecretResult:
        await config.delete_secret(p.key)
        return SecretResult(key=p.key, configured=False)

    return [
        Method("config/get", ConfigGetParams, ConfigResult, get, summary="Current app settings (secrets: set or not)."),
        Method(
            "config/update",
            ConfigUpdateParams,
            ConfigResult,
            update,
            summary="Change app settings (e.g. llm.fallbackProvider, llm.fallbackModel); null resets a key.",
        ),
        Method(
            "config/secret/set",
            SecretSetParams,
            SecretResult,
            secret_set,
            summary="Store a secret setting (e.g. llm.fallbackApiKey), encrypted; it is never returned.",
        ),
        Method(
            "config/secret/delete",
            SecretDeleteParams,
            SecretResult,
            secret_delete,
            summary="Remove a secret setting.",
        ),
    ]
