"""Text embeddings behind one seam (ARCHITECTURE.md §7: ``Embedder``).

An :class:`Embedder` turns texts into float32 vectors and says what it is (:class:`EmbedderInfo`): the model id,
version, dimension and normalisation that the vector index records, so a change of embedder is detected
(phase-2 §9.9 INDEX_MODEL_MISMATCH) rather than silently mixing vectors.

``embed`` is blocking (numpy); callers run it in a worker thread, in batches.
"""

from __future__ import annotations

from .base import Embedder, EmbedderInfo
from .hashing import HashEmbedder
from .use import UniversalSentenceEncoder

__all__ = ["Embedder", "EmbedderInfo", "HashEmbedder", "UniversalSentenceEncoder", "default_embedder"]


def default_embedder() -> Embedder:
    """The embedded default: Google USE multilingual v3 (512-d, numpy only, weights inside the package)."""
    return UniversalSentenceEncoder.shared()
