"""A deterministic, dependency-free embedder for tests: hashed character bigrams and words, L2-normalised.

Not a fake that pretends to be the real model: it has its own model id (``hash-v1``), so an index built with it
is reported as incompatible with the USE model (phase-2 §9.9's own example uses ``hash-v1``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from .base import EmbedderInfo

_WORD = re.compile(r"\w+", re.UNICODE)


class HashEmbedder:
    def __init__(self, dimension: int = 128, model_id: str = "hash-v1") -> None:
        self._info = EmbedderInfo(model_id=model_id, model_version="1", dimension=dimension, normalization="l2")

    @property
    def info(self) -> EmbedderInfo:
        return self._info

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        dim = self._info.dimension
        out = np.zeros((len(texts), dim), dtype=np.float32)
        for row, text in enumerate(texts):
            lowered = text.lower()
            features = _WORD.findall(lowered)
            features += [lowered[i : i + 2] for i in range(len(lowered) - 1) if not lowered[i : i + 2].isspace()]
            for feature in features:
                digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
                bucket = int.from_bytes(digest[:4], "little") % dim
                out[row, bucket] += 1.0 if digest[4] & 1 else -1.0
            norm = float(np.linalg.norm(out[row]))
            if norm > 0:
                out[row] /= norm
        return out
