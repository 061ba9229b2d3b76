"""Build the configured :class:`~sidecar.embeddings.Embedder` from an :class:`EmbedderConfig`.

Remote embedders (an OpenAI-compatible ``POST {base_url}/embeddings`` or Ollama's ``POST {base_url}/api/embed``)
are L2-normalised here, so every index this module fills records ``normalization: "l2"``. httpx is imported on
first use only (start-up stays light).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import numpy as np

from sidecar.core.errors import BadRequestError, UpstreamError
from sidecar.embeddings import Embedder, EmbedderInfo, HashEmbedder, default_embedder

from .models import EmbedderConfig

if TYPE_CHECKING:
    import httpx

DEFAULT_HASH_DIMENSION = 128
_BATCH = 64
_TIMEOUT_S = 60.0


class RemoteEmbedder:
    """An embeddings endpoint. ``dimension`` comes from the config or from one probe call (:meth:`probe`)."""

    def __init__(
        self,
        kind: str,
        base_url: str,
        model: str,
        dimension: int | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise BadRequestError("The embedder base_url must be an http(s) URL.", code="EMBEDDER_CONFIG_INVALID")
        self.kind = kind
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._transport = transport
        self._client: httpx.Client | None = None
        self._dimension = dimension

    @property
    def info(self) -> EmbedderInfo:
        return EmbedderInfo(
            model_id=f"{self.kind}:{self.model}",
            model_version=urlsplit(self.base_url).netloc,
            dimension=self._dimension or 0,
            normalization="l2",
        )

    def _http(self) -> httpx.Client:
        if self._client is None:
            import httpx

            self._client = httpx.Client(timeout=_TIMEOUT_S, transport=self._transport)
        return self._client

    def _post(self, texts: list[str]) -> list[Any]:
        import httpx

        if self.kind == "ollama":
            url, body = f"{self.base_url}/api/embed", {"model": self.model, "input": texts}
        else:
            url, body = f"{self.base_url}/embeddings", {"model": self.model, "input": texts}
        try:
            resp = self._http().post(url, json=body)
        except httpx.HTTPError:
            raise UpstreamError("The embeddings endpoint could not be reached.", code="EMBEDDER_UNAVAILABLE") from None
        if resp.status_code >= 400:
            raise UpstreamError(
                "The embeddings endpoint answered an error.",
                code="EMBEDDER_FAILED",
                details={"status": resp.status_code},
            )
        try:
            data = resp.json()
            if self.kind == "ollama":
                vectors = data["embeddings"]
            else:
                vectors = [item["embedding"] for item in sorted(data["data"], key=lambda d: d.get("index", 0))]
        except (ValueError, KeyError, TypeError):
            raise UpstreamError(
                "The embeddings endpoint answered an unexpected body.", code="EMBEDDER_FAILED"
            ) from None
        if len(vectors) != len(texts):
            raise UpstreamError("The embeddings endpoint answered the wrong number of vectors.", code="EMBEDDER_FAILED")
        return vectors

    def _vectors(self, texts: list[str]) -> np.ndarray:
        """The endpoint's vectors for ``texts`` as a finite ``(len(texts), d)`` matrix, ``d`` ≥ 1."""
        try:
            arr = np.asarray(self._post(texts), dtype=np.float32)
        except (ValueError, TypeError):  # not numbers, or ragged
            arr = np.zeros(0, dtype=np.float32)
        if arr.ndim != 2 or arr.shape[1] < 1 or not np.isfinite(arr).all():
            raise UpstreamError("The embeddings endpoint answered malformed vectors.", code="EMBEDDER_FAILED")
        return arr

    def probe(self) -> int:
        """Learn the dimension with one call (blocking)."""
        if self._dimension is None:
            self._dimension = int(self._vectors(["dimension probe"]).shape[1])
        return self._dimension

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        dim = self.probe()
        out = np.zeros((len(texts), dim), dtype=np.float32)
        for start in range(0, len(texts), _BATCH):
            chunk = list(texts[start : start + _BATCH])
            arr = self._vectors(chunk)
            if arr.shape[1] != dim:
                raise UpstreamError(
                    "The embeddings endpoint changed its vector size.",
                    code="EMBEDDER_FAILED",
                    details={"expected": dim, "got": int(arr.shape[1])},
                )
            norms = np.linalg.norm(arr, axis=1, keepdims=True)
            out[start : start + len(chunk)] = arr / np.where(norms > 0, norms, 1.0)
        return out


def build_embedder(config: EmbedderConfig, *, transport: httpx.BaseTransport | None = None) -> Embedder:
    """The embedder ``config`` names (not loaded yet: the USE weights load on the first ``embed``)."""
    if config.kind == "default":
        return default_embedder()
    if config.kind == "hash-v1":
        return HashEmbedder(dimension=config.dimension or DEFAULT_HASH_DIMENSION)
    assert config.base_url and config.model
    return RemoteEmbedder(config.kind, config.base_url, config.model, config.dimension, transport=transport)
