"""ProviderService: provider records with write-only keys, their adapters, health, and chat.

Chat composes :class:`~sidecar.providers.fallback.FallbackProvider` (retry + failover, see :mod:`.fallback`) over
the provider's cached adapter and the configured fallback (``llm.fallbackProvider``, ``llm.fallbackModel``, and
``llm.fallbackApiKey`` instead of its own key when set).
"""

from __future__ import annotations

import builtins
import functools
import json
import logging
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import anyio

from ..config.service import ConfigService
from ..core.common import ErrorInfo, now_iso
from ..core.errors import BadRequestError, ConflictError, NotFoundError
from ..ir import MetonaErrorCode, MetonaRequest, MetonaResponse
from ..storage.secrets import SecretKeyError, SecretStore
from ..storage.sqlite import Database
from .adapters import build_adapter
from .base import BaseAdapter, ProviderConfig
from .capabilities import ModelSpec
from .errors import ProviderError, phase2_code, provider_error
from .fallback import RETRY_BASE_S, Fallback, FallbackProvider, Notify, Observe, RetryPolicy
from .models import ModelInfo, PresetInfo, Provider, ProviderHealth, ProviderTestResult
from .presets import PRESETS, Preset
from .stream import Emit

logger = logging.getLogger(__name__)

HEALTH_TIMEOUT_S = 10.0

_MIGRATIONS = [
    """
    CREATE TABLE providers (
        provider_id TEXT PRIMARY KEY,
        preset TEXT NOT NULL,
        display_name TEXT NOT NULL,
        base_url TEXT NOT NULL,
        protocol TEXT NOT NULL,
        default_model TEXT,
        options TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    )
    """,
]
_COLUMNS = "provider_id, preset, display_name, base_url, protocol, default_model, options, created_at, updated_at"


def _key_name(provider_id: str) -> str:
    return f"provider:{provider_id}:api_key"


def _headers_name(provider_id: str) -> str:
    return f"provider:{provider_id}:extra_headers"


HIDDEN = "[hidden]"


def _hide_headers(options: dict[str, Any], stored: dict[str, str]) -> tuple[dict[str, Any], dict[str, str] | None]:
    """Split ``options.extra_headers`` off into a secret (a header may carry a key, e.g. Azure's ``api-key``).

    The record keeps only the header names, each valued ``[hidden]``; a ``[hidden]`` value sent back (options
    round-tripped from ``providers/get``) keeps the stored value. Returns (options to store, headers to store or
    None when ``options`` does not mention them).
    """
    if "extra_headers" not in options:
        return options, None
    given = options["extra_headers"] or {}
    headers = {name: stored.get(name, "") if value == HIDDEN else value for name, value in given.items()}
    headers = {name: value for name, value in headers.items() if value}
    options["extra_headers"] = dict.fromkeys(headers, HIDDEN)
    if not headers:
        del options["extra_headers"]
    return options, headers


class ProviderNotFound(NotFoundError):
    default_code = "PROVIDER_NOT_FOUND"


class ProviderService:
    def __init__(
        self,
        db: Database,
        secrets: SecretStore,
        config: ConfigService,
        *,
        transport: Any = None,
        local_runtime: Any = None,
        retry_base_s: float = RETRY_BASE_S,
    ) -> None:
        """``local_runtime``: the embedded model's runtime, handed to ``local`` adapters (none: they answer
        LOCAL_MODEL_UNAVAILABLE)."""
        self._db = db
        self._secrets = secrets
        self._config = config
        self._transport = transport
        self._local_runtime = local_runtime
        self._retry_base_s = retry_base_s
        self._adapters: dict[str, tuple[str, BaseAdapter]] = {}

    async def migrate(self) -> None:
        await self._db.migrate("providers", _MIGRATIONS)

    async def close(self) -> None:
        adapters, self._adapters = self._adapters, {}
        for _stamp, adapter in adapters.values():
            await adapter.aclose()

    # ---- presets and records ------------------------------------------------------------------------------

    @staticmethod
    def presets() -> list[PresetInfo]:
        return [PresetInfo.model_validate(p.to_dict()) for p in PRESETS.values()]

    async def create(
        self,
        *,
        preset: str,
        provider_id: str | None = None,
        display_name: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        default_model: str | None = None,
        protocol: str | None = None,
        options: dict[str, Any] | None = None,
    ) -> Provider:
        spec = _preset(preset)
        protocol = protocol or spec.protocol
        if protocol not in spec.protocols:
            raise BadRequestError(
                f"preset {preset!r} speaks {', '.join(spec.protocols)}, not {protocol!r}",
                code="PROVIDER_PROTOCOL_UNSUPPORTED",
                details={"preset": preset, "protocols": list(spec.protocols)},
            )
        options = dict(options or {})
        self._check_options(preset, protocol, options, base_url or spec.base_urls[protocol])
        options, headers = _hide_headers(options, {})
        now = now_iso()
        row = {
            "provider_id": provider_id,
            "preset": preset,
            "display_name": display_name or spec.display_name,
            "base_url": (base_url or spec.base_urls[protocol]).rstrip("/"),
            "protocol": protocol,
            "default_model": default_model or spec.default_model,
            "options": json.dumps(options, ensure_ascii=False),
            "created_at": now,
            "updated_at": now,
        }

        def insert(conn: sqlite3.Connection) -> str:
            pid = provider_id or _free_id(conn, preset)
            if conn.execute("SELECT 1 FROM providers WHERE provider_id = ?", (pid,)).fetchone():
                raise ConflictError(
                    f"provider {pid!r} already exists", code="PROVIDER_ALREADY_EXISTS", details={"provider_id": pid}
                )
            conn.execute(
                f"INSERT INTO providers ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (pid, *[row[c] for c in _COLUMNS.split(", ")[1:]]),
            )
            # one transaction: a crash never leaves a provider without the key it was created with
            if api_key:
                self._secrets.put_in(conn, _key_name(pid), api_key)
            if headers:
                self._secrets.put_in(conn, _headers_name(pid), json.dumps(headers))
            return pid

        pid = await self._db.run(insert)
        return await self.get(pid)

    async def get(self, provider_id: str) -> Provider:
        row = await self._row(provider_id)
        return self._provider(row, await self._secrets.has(_key_name(provider_id)))

    async def list(self) -> list[Provider]:
        rows = await self._db.read(
            lambda conn: conn.execute(f"SELECT {_COLUMNS} FROM providers ORDER BY rowid").fetchall()
        )
        keyed = await self._secrets.names("provider:")
        return [self._provider(r, _key_name(r[0]) in keyed) for r in rows]

    async def update(
        self,
        provider_id: str,
        *,
        display_name: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        default_model: str | None = None,
        options: dict[str, Any] | None = None,
    ) -> Provider:
        row = await self._row(provider_id)
        current = self._provider(row, False)
        if options is not None or base_url is not None:
            checked = options if options is not None else current.options
            self._check_options(current.preset, current.protocol, checked, base_url or current.base_url)
        changes: dict[str, Any] = {}
        if display_name is not None:
            changes["display_name"] = display_name
        if base_url is not None:
            changes["base_url"] = base_url.rstrip("/")
        if default_model is not None:
            changes["default_model"] = default_model or None
        headers: dict[str, str] | None = None
        if options is not None:
            options, headers = _hide_headers(dict(options), await self._headers(provider_id))
            changes["options"] = json.dumps(options, ensure_ascii=False)
        changes["updated_at"] = now_iso()

        def write(conn: sqlite3.Connection) -> None:
            sets = ", ".join(f"{k} = ?" for k in changes)
            conn.execute(f"UPDATE providers SET {sets} WHERE provider_id = ?", (*changes.values(), provider_id))
            if api_key is not None:
                if api_key:
                    self._secrets.put_in(conn, _key_name(provider_id), api_key)
                else:
                    self._secrets.delete_in(conn, _key_name(provider_id))
            if headers is not None:
                if headers:
                    self._secrets.put_in(conn, _headers_name(provider_id), json.dumps(headers))
                else:
                    self._secrets.delete_in(conn, _headers_name(provider_id))

        await self._db.run(write)
        await self._forget(provider_id)
        return await self.get(provider_id)

    async def _headers(self, provider_id: str) -> dict[str, str]:
        raw = await self._secrets.get(_headers_name(provider_id))
        return json.loads(raw) if raw else {}

    async def delete(self, provider_id: str) -> None:
        await self._row(provider_id)

        def remove(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM providers WHERE provider_id = ?", (provider_id,))
            self._secrets.delete_in(conn, _key_name(provider_id))
            self._secrets.delete_in(conn, _headers_name(provider_id))

        await self._db.run(remove)
        await self._forget(provider_id)

    # ---- adapters -------------------------------------------------------------------------------------------

    async def adapter(self, provider_id: str) -> BaseAdapter:
        row = await self._row(provider_id)
        stamp = row[8]
        cached = self._adapters.get(provider_id)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        if cached is not None:
            await cached[1].aclose()
        adapter = self._build(await self._config_of(row))
        self._adapters[provider_id] = (stamp, adapter)
        return adapter

    def _build(self, config: ProviderConfig) -> BaseAdapter:
        return build_adapter(config, transport=self._transport, local_runtime=self._local_runtime)

    async def models(self, provider_id: str) -> builtins.list[ModelInfo]:
        adapter = await self.adapter(provider_id)
        with _redacting(adapter):
            specs = await adapter.model_specs()
        return [ModelInfo.model_validate(s.to_phase2()) for s in specs]

    async def test(
        self,
        *,
        provider_id: str | None = None,
        preset: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        protocol: str | None = None,
        model: str | None = None,
    ) -> ProviderTestResult:
        """List the models (and, with ``model``, make a one-token call): the phase-2 ``POST /api/providers/test``."""
        if provider_id is not None:
            adapter = await self.adapter(provider_id)
        elif preset is not None:
            spec = _preset(preset)
            proto = protocol or spec.protocol
            if proto not in spec.protocols:
                raise BadRequestError(
                    f"preset {preset!r} does not speak {proto!r}", code="PROVIDER_PROTOCOL_UNSUPPORTED"
                )
            config = ProviderConfig(
                provider_id=preset,
                preset=preset,
                protocol=proto,
                base_url=(base_url or spec.base_urls[proto]).rstrip("/"),
                api_key=api_key,
                default_model=model or spec.default_model,
                models=spec.models,
            )
            adapter = self._build(config)
        else:
            raise BadRequestError("give provider_id or preset", code="VALIDATION_ERROR")
        started = time.perf_counter()
        count: int | None = None
        error: ErrorInfo | None = None
        try:
            with _redacting(adapter):
                self._require_key(adapter)
                count = len(await adapter.model_specs())
                if model:
                    ping = _ping_request()
                    await adapter.run(ping, model, adapter.assembler(ping, model, None), stream=False)
        except ProviderError as exc:
            error = _error_info(exc)
        finally:
            if provider_id is None:
                await adapter.aclose()
        return ProviderTestResult(
            ok=error is None,
            provider_id=provider_id,
            preset=adapter.config.preset,
            protocol=adapter.config.protocol,
            latency_ms=int((time.perf_counter() - started) * 1000),
            model_count=count,
            error=error,
        )

    async def health(self, provider_id: str | None = None) -> builtins.list[ProviderHealth]:
        """Check one or every provider, concurrently, each bounded by HEALTH_TIMEOUT_S."""
        ids = [provider_id] if provider_id else [p.provider_id for p in await self.list()]
        results: dict[str, ProviderHealth] = {}

        async def check(pid: str) -> None:
            started = time.perf_counter()
            error: ErrorInfo | None = None
            try:
                adapter = await self.adapter(pid)
                with anyio.fail_after(HEALTH_TIMEOUT_S), _redacting(adapter):
                    self._require_key(adapter)
                    await adapter.list_models()
            except ProviderError as exc:
                error = _error_info(exc)
            except TimeoutError:
                error = ErrorInfo(
                    code="PROVIDER_TIMEOUT", message=f"{pid}: no answer within {HEALTH_TIMEOUT_S:g} s", details={}
                )
            except SecretKeyError as exc:  # this provider's key is unusable; the others are still checked
                if provider_id is not None:
                    raise
                error = ErrorInfo(code=exc.code, message=exc.message, details=exc.details)
            results[pid] = ProviderHealth(
                provider_id=pid,
                healthy=error is None,
                latency_ms=int((time.perf_counter() - started) * 1000),
                checked_at=now_iso(),
                error=error,
            )

        if provider_id is not None:
            await check(provider_id)  # its errors (e.g. an undecryptable key) answer the request as they are
        else:
            async with anyio.create_task_group() as tg:
                for pid in ids:
                    tg.start_soon(check, pid)
        return [results[pid] for pid in ids]

    # ---- chat (retry + failover: .fallback) -------------------------------------------------------------------

    async def default_provider(self) -> str:
        configured = await self._config.get("llm.defaultProvider")
        if configured:
            return str(configured)
        providers = await self.list()
        if len(providers) == 1:
            return providers[0].provider_id
        raise BadRequestError(
            "no provider_id given and no llm.defaultProvider configured"
            + (" (no provider is configured)" if not providers else ""),
            code="PROVIDER_NOT_CONFIGURED",
        )

    async def chat(
        self,
        provider_id: str | None,
        model: str | None,
        request: MetonaRequest,
        *,
        emit: Emit | None = None,
        notify: Notify | None = None,
        observe: Observe | None = None,
    ) -> MetonaResponse:
        """Send ``request`` (streamed through ``emit`` when given); raise ProviderError when it finally fails.

        ``constraints.timeoutMs`` bounds the whole call, retries and failover included. ``observe(kind, data)``
        hears each failed attempt that is retried (``"retry"``) and a failover (``"failover"``): the agent's
        trace records them.
        """
        pid = provider_id or await self.default_provider()
        primary = await self.adapter(pid)
        policy = RetryPolicy(int(await self._config.get("llm.maxRetries")), self._retry_base_s)
        provider = FallbackProvider(
            pid,
            primary,
            functools.partial(self._fallback, pid),
            policy=policy,
            check=self._require_key,
            release=self._close_one_off,
        )
        return await provider.chat(model, request, emit=emit, notify=notify, observe=observe)

    async def _close_one_off(self, adapter: BaseAdapter) -> None:
        """Close ``adapter`` unless it is the cached one (a fallback built with ``llm.fallbackApiKey`` is not)."""
        if adapter is not self._adapters.get(adapter.config.provider_id, (None, None))[1]:
            await adapter.aclose()

    async def _fallback(self, primary_id: str, primary_model: str | None) -> Fallback | None:
        fallback_id = await self._config.get("llm.fallbackProvider")
        if not fallback_id:
            return None
        fallback_model = await self._config.get("llm.fallbackModel")
        if fallback_id == primary_id and (fallback_model or None) in (None, primary_model):
            return None  # the same provider and model again: nothing to fail over to
        try:
            adapter = await self.adapter(str(fallback_id))
            key = await self._config.secret("llm.fallbackApiKey")
        except NotFoundError:
            logger.error("llm.fallbackProvider %r is not a configured provider", fallback_id)
            return None
        except SecretKeyError:  # a key stored under another master key: the primary's error stands
            logger.error("the fallback provider's API key cannot be decrypted; not failing over")
            return None
        if key:
            adapter = self._build(replace(adapter.config, api_key=key))
        return adapter, fallback_model

    # ---- internals ---------------------------------------------------------------------------------------------

    def _require_key(self, adapter: BaseAdapter) -> None:
        preset = PRESETS.get(adapter.config.preset)
        if preset is not None and preset.requires_api_key and not adapter.config.api_key:
            raise provider_error(
                MetonaErrorCode.AUTH_INVALID,
                f"{adapter.provider_id}: no API key is configured",
                adapter.provider_id,
                retryable=False,
                provider_code="missing_api_key",
            )

    async def _row(self, provider_id: str) -> tuple[Any, ...]:
        row = await self._db.read(
            lambda conn: conn.execute(
                f"SELECT {_COLUMNS} FROM providers WHERE provider_id = ?", (provider_id,)
            ).fetchone()
        )
        if row is None:
            raise ProviderNotFound(f"provider {provider_id!r} not found", details={"provider_id": provider_id})
        return tuple(row)

    async def _config_of(self, row: tuple[Any, ...]) -> ProviderConfig:
        pid, preset, _name, base_url, protocol, default_model, options_json, _c, _u = row
        options = json.loads(options_json)
        if "extra_headers" in options:
            options["extra_headers"] = await self._headers(pid)
        models = PRESETS[preset].models if preset in PRESETS else ()
        extra = options.get("models")
        if isinstance(extra, list):
            models = tuple(_spec(m) for m in extra) + tuple(
                m for m in models if m.id not in {e.get("id") for e in extra}
            )
        return ProviderConfig(
            provider_id=pid,
            preset=preset,
            protocol=protocol,
            base_url=base_url,
            api_key=await self._secrets.get(_key_name(pid)),
            default_model=default_model,
            options=options,
            models=models,
        )

    def _provider(self, row: tuple[Any, ...], keyed: bool) -> Provider:
        pid, preset, name, base_url, protocol, default_model, options_json, created, updated = row
        return Provider(
            provider_id=pid,
            preset=preset,
            display_name=name,
            base_url=base_url,
            protocol=protocol,
            default_model=default_model,
            options=json.loads(options_json),
            api_key_configured=keyed,
            created_at=created,
            updated_at=updated,
        )

    def _check_options(self, preset: str, protocol: str, options: dict[str, Any], base_url: str) -> None:
        if protocol == "mock":
            from .mock import MockScript

            if "script" in options:
                try:
                    MockScript.model_validate(options["script"])
                except ValueError as exc:
                    raise BadRequestError(
                        "options.script is not a valid mock script",
                        code="VALIDATION_ERROR",
                        details={"error": str(exc)},
                    ) from None
        elif protocol == "local":  # the embedded model (issue 15): a GGUF path given by the host, or none
            path = options.get("model_path")
            if path is not None and not (isinstance(path, str) and path.strip()):
                raise BadRequestError("options.model_path must be a file path", code="VALIDATION_ERROR")
            arguments_model = options.get("arguments_model")
            if arguments_model is not None and arguments_model not in ("auto", "always", "same"):
                raise BadRequestError(
                    'options.arguments_model must be "auto", "always" or "same"', code="VALIDATION_ERROR"
                )
        elif base_url.startswith("mock://"):
            raise BadRequestError("base_url must be an http(s) URL", code="VALIDATION_ERROR")
        models = options.get("models")
        if models is not None:
            if not isinstance(models, list):
                raise BadRequestError("options.models must be a list", code="VALIDATION_ERROR")
            for m in models:
                _spec(m)
        headers = options.get("extra_headers")
        if headers is not None and not (
            isinstance(headers, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())
        ):
            raise BadRequestError("options.extra_headers must map strings to strings", code="VALIDATION_ERROR")

    async def _forget(self, provider_id: str) -> None:
        cached = self._adapters.pop(provider_id, None)
        if cached is not None:
            await cached[1].aclose()


@contextmanager
def _redacting(adapter: BaseAdapter) -> Iterator[None]:
    """Strip the adapter's API key from any error message on its way out (a server may echo it back)."""
    try:
        yield
    except ProviderError as exc:
        exc.error.message = adapter.redact(exc.error.message)
        raise


def _preset(name: str) -> Preset:
    spec = PRESETS.get(name)
    if spec is None:
        raise BadRequestError(
            f"unknown preset {name!r}", code="PROVIDER_PRESET_UNKNOWN", details={"presets": sorted(PRESETS)}
        )
    return spec


def _free_id(conn: sqlite3.Connection, preset: str) -> str:
    taken = {r[0] for r in conn.execute("SELECT provider_id FROM providers WHERE provider_id LIKE ?", (preset + "%",))}
    if preset not in taken:
        return preset
    n = 2
    while f"{preset}-{n}" in taken:
        n += 1
    return f"{preset}-{n}"


def _spec(raw: Any) -> ModelSpec:
    if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
        raise BadRequestError("each of options.models needs an id", code="VALIDATION_ERROR")
    try:
        return ModelSpec(
            id=raw["id"],
            display_name=str(raw.get("display_name", "")),
            context_window=int(raw.get("context_window", ModelSpec.CONSERVATIVE_CONTEXT)),
            max_output_tokens=int(raw.get("max_output_tokens", ModelSpec.CONSERVATIVE_OUTPUT)),
            capabilities=tuple(raw.get("capabilities") or ("chat", "streaming")),
        )
    except (TypeError, ValueError):
        raise BadRequestError(
            "options.models: bad model entry", code="VALIDATION_ERROR", details={"id": raw["id"]}
        ) from None


def _error_info(exc: ProviderError) -> ErrorInfo:
    code, _status = phase2_code(exc.error, interrupted=exc.interrupted)
    return ErrorInfo(code=code, message=exc.error.message, details={"error": exc.error.model_dump(mode="json")})


def _ping_request() -> MetonaRequest:
    from ..ir import MetonaGenerationParams, MetonaMessage, MetonaRequestMeta, MetonaSystemPrompt

    now = int(time.time() * 1000)
    return MetonaRequest(
        meta=MetonaRequestMeta(
            session_id="provider-test", iteration=1, request_id="provider-test", timestamp=now, agent_version="sidecar"
        ),
        system_prompt=MetonaSystemPrompt(
            role_definition="", output_constraints="Answer with one word.", safety_guidelines=""
        ),
        messages=[MetonaMessage(role="user", content="ping", timestamp=now)],
        params=MetonaGenerationParams(max_tokens=1, temperature=0.0),
    )
