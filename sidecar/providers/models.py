"""``providers/*`` and ``chat/*`` params and results (phase-2 rules: snake_case; IR objects stay camelCase)."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator

from ..core.common import ErrorInfo, Params, Phase2Model
from ..ir import MetonaRequest

PROVIDER_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def _check_id(value: str | None) -> str | None:
    if value is not None and not PROVIDER_ID.match(value):
        raise ValueError("provider_id: 1-64 chars of a-z 0-9 . _ -, starting with a letter or digit")
    return value


def _check_url(value: str | None) -> str | None:
    if value is not None and not re.match(r"^(https?|mock)://[^\s/]+", value):
        raise ValueError("base_url must be an absolute http(s) URL")
    return value


class ModelInfo(Phase2Model):
    """phase-2 §8.1."""

    model: str
    display_name: str
    capabilities: list[str]
    context_window: int
    max_output_tokens: int
    deprecated: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)


class PresetInfo(Phase2Model):
    preset: str
    display_name: str
    protocol: str
    protocols: list[str]
    base_url: str
    base_urls: dict[str, str]
    default_model: str | None
    requires_api_key: bool
    models: list[ModelInfo]


class PresetList(Phase2Model):
    items: list[PresetInfo]


class Provider(Phase2Model):
    """A configured provider. The API key is write-only: only ``api_key_configured`` is ever returned."""

    provider_id: str
    preset: str
    display_name: str
    base_url: str
    protocol: str
    default_model: str | None
    options: dict[str, Any]
    api_key_configured: bool
    created_at: str
    updated_at: str


class ProviderList(Phase2Model):
    items: list[Provider]


class ProviderCreateParams(Params):
    provider_id: str | None = None
    preset: str
    display_name: str | None = None
    base_url: str | None = None
    api_key: str | None = Field(None, min_length=1, description="write-only: stored encrypted, never returned")
    default_model: str | None = None
    protocol: str | None = None
    options: dict[str, Any] | None = None

    _id = field_validator("provider_id")(_check_id)
    _url = field_validator("base_url")(_check_url)


class ProviderUpdateParams(Params):
    provider_id: str
    display_name: str | None = None
    base_url: str | None = None
    api_key: str | None = Field(None, description="write-only; an empty string removes the stored key")
    default_model: str | None = None
    options: dict[str, Any] | None = None

    _url = field_validator("base_url")(_check_url)


class ProviderIdParams(Params):
    provider_id: str


class ProviderDeleted(Phase2Model):
    provider_id: str
    deleted: bool


class ModelList(Phase2Model):
    items: list[ModelInfo]


class ProviderTestParams(Params):
    """Test a saved provider (``provider_id``) or an unsaved configuration (``preset`` + fields)."""

    provider_id: str | None = None
    preset: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    protocol: str | None = None
    model: str | None = None

    _url = field_validator("base_url")(_check_url)


class ProviderTestResult(Phase2Model):
    ok: bool
    provider_id: str | None
    preset: str
    protocol: str
    latency_ms: int
    model_count: int | None = None
    error: ErrorInfo | None = None


class ProviderHealthParams(Params):
    provider_id: str | None = Field(None, description="one provider (default: every configured provider)")


class ProviderHealth(Phase2Model):
    provider_id: str
    healthy: bool
    latency_ms: int
    checked_at: str
    error: ErrorInfo | None = None


class ProviderHealthList(Phase2Model):
    items: list[ProviderHealth]


class ChatParams(Params):
    provider_id: str | None = Field(None, description="default: config llm.defaultProvider, else the only provider")
    model: str | None = Field(None, description="default: the provider's default_model")
    request: MetonaRequest


class ProviderSwitchedParams(Phase2Model):
    """``agent/providerSwitched``: the sidecar failed over to the configured fallback (IR 故障转移 step 3)."""

    from_provider: str
    to_provider: str
    model: str
    reason: str
    """The IR error code that caused the switch (e.g. ``rate_limited``)."""


class LocalModelProgress(Phase2Model):
    """``local/modelProgress``: the embedded model is being prepared on its first use (issue 15)."""

    stage: Literal["verify", "assemble", "requantize", "convert"]
    fraction: float = Field(ge=0, le=1)
