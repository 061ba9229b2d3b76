"""The Embedder seam."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

Normalization = Literal["l2", "none"]


@dataclass(frozen=True, slots=True)
class EmbedderInfo:
    """What a vector index records about the model that filled it (phase-2 §9.9 ``embedding``)."""

    model_id: str
    model_version: str
    dimension: int
    normalization: Normalization

    def as_dict(self) -> dict[str, Any]:
        return {
            "model_id": self.model_id,
            "model_version": self.model_version,
            "dimension": self.dimension,
            "normalization": self.normalization,
        }


class Embedder(Protocol):
    @property
    def info(self) -> EmbedderInfo: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for ``texts``: float32, shape ``(len(texts), info.dimension)``. Blocking; call off the loop."""
        ...
