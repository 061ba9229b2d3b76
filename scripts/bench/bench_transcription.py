#!/usr/bin/env python3
"""Transcription figures (issue 10 item 9). Prints figures, asserts nothing about time.

    .venv/bin/python scripts/bench/bench_transcription.py [--repeat 3] [--long-minutes 30] [--skip-long]

Audio is made here with espeak-ng (tests/support/speech.py: voices A, B, C, B, 1 s gaps), no network.

1. Real-time factor per profile (``en-fast`` = tiny.en, ``default`` = base) of raw ``faster_whisper`` in this
   process with the profile's settings (int8, beam 5, VAD, cpu_threads = cores); goal RTF ≤ 0.15 for en-fast.
2. The sidecar's wall time from ``media/transcriptions/create`` to ``Completed`` over real stdio, divided by
   raw faster-whisper on the same file and model in the same run: "cold" (first job: worker start + model
   load, against raw load + transcribe) and "warm" (model already loaded in the worker, against raw transcribe
   alone). Goal ≤ 1.05×.
3. Diarization time per minute of audio (the ``DiarizationCompleted`` event's duration_ms, pyannote pipeline
   with the packaged weights; the one-off pipeline build is excluded); goal ≤ 0.15× the audio's length.
4. WER on a generated multi-voice English set, per profile (from the sidecar's transcripts).
5. Peak RSS (VmHWM) of the worker while it transcribes a ``--long-minutes`` file (en-fast, with diarization);
   goal < 1.5 GB.
6. ``--real``: real speech nobody here recorded (datasets/speech-real: AISHELL-1/2, WenetSpeech, LibriSpeech,
   JFK, ... with their published transcripts): per clip and per profile, CER for Mandarin (both sides folded to
   simplified, punctuation and spaces dropped) and WER for English, language detected, RTF; raw faster-whisper in
   this process with the profile's settings and the sidecar's script conversion. Goals (issue 34): Mandarin CER
   ≤ 0.10 and English WER ≤ 0.05 with the default profile and language detection, RTF ≤ 0.5.
7. ``--first-segment``: a cold sidecar (fresh process, no worker) and a ≈60 s file with diarization on: seconds
   from ``media/transcriptions/create`` to the first ``Segment`` event, to ``DiarizationStarted`` and to
   ``Completed``; then the same on the now warm worker. Goal (issue 34): first segment within 5 s, cold.

The machine is shared (2 cores): figures are noisy; each section prints the load average beside its figures.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from sidecar.core.chinese import SIMPLIFIED, converter, fold  # noqa: E402
from sidecar.media import resolve  # noqa: E402
from sidecar.media.models import PROFILES  # noqa: E402
from tests.support import speech  # noqa: E402
from tests.support.sidecar_proc import Sidecar  # noqa: E402

# a second set of sentences for the WER figure (the test set is speech.TURNS)
MORE_TURNS = [
    ("C", "Our quarterly revenue grew by twelve percent compared with last year."),
    ("A", "The new office opens in the spring, close to the central station."),
    ("B", "Could you please review the contract and send me your comments by Friday?"),
    ("C", "The server maintenance window starts at midnight and lasts two hours."),
    ("A", "We should hire two more engineers for the mobile team."),
]


def load_raw(model_dir: Path, profile: Any) -> tuple[Any, float]:
    from faster_whisper import WhisperModel

    t0 = time.perf_counter()
    model = WhisperModel(str(model_dir), device="cpu", compute_type=profile.compute_type, cpu_threads=os.cpu_count())
    return model, time.perf_counter() - t0


def raw_transcribe(model: Any, profile: Any, wav: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    segments, _ = model.transcribe(
        str(wav),
        language=None if profile.multilingual else "en",
        beam_size=profile.beam_size,
        vad_filter=profile.vad_filter,
        vad_parameters={"min_silence_duration_ms": profile.vad_min_silence_ms},
        condition_on_previous_text=profile.condition_on_previous_text,
    )
    text = " ".join(s.text.strip() for s in segments)
    return time.perf_counter() - t0, text


def sidecar_job(sc: Sidecar, path: Path, **params: Any) -> tuple[float, dict[str, Any], list[dict[str, Any]]]:
    att = sc.result("attachments/import", {"path": str(path)})["attachment_id"]
    t0 = time.perf_counter()
    job = sc.result("media/transcriptions/create", {"attachment_id": att, **params})
    sub = sc.result("events/subscribe", {"resource_id": job["job_id"]})["subscription_id"]
    events = []
    while True:
        msg = sc.next(3600)
        if isinstance(msg, dict) and msg.get("method") == "event" and msg["params"]["subscription_id"] == sub:
            events.append(msg["params"])
            if msg["params"]["event"] in {"Completed", "Failed", "Cancelled"}:
                break
    wall = time.perf_counter() - t0
    return wall, sc.result("media/transcriptions/get", {"job_id": job["job_id"]}), events


def worker_pid(sidecar_pid: int) -> int | None:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if b"sidecar.media.worker" in (entry / "cmdline").read_bytes():
                    stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                    if int(stat[1]) == sidecar_pid:
                        return int(entry.name)
            except OSError:
                continue
    return None


def vm_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


REAL = ROOT / "datasets" / "speech-real"


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def real_clips(audio_dir: Path) -> list[dict[str, Any]]:
    """The manifest's clips present in ``audio_dir`` with the right sha256 (others are reported and skipped)."""
    import hashlib
    import json

    clips = []
    for clip in json.loads((REAL / "manifest.json").read_text("utf-8"))["clips"]:
        path = audio_dir / clip["file"]
        if not path.is_file():
            print(f"[6] skipped {clip['file']}: not in {audio_dir} (datasets/speech-real/README.md says where from)")
        elif hashlib.sha256(path.read_bytes()).hexdigest() != clip["sha256"]:
            print(f"[6] skipped {clip['file']}: sha256 differs from the manifest")
        else:
            clips.append({**clip, "path": path})
    return clips


def _chars(text: str) -> list[str]:
    import re

    return list(re.sub(r"[\W_]+", "", fold(text)))


def char_errors(reference: str, hypothesis: str) -> tuple[int, int]:
    """(edits, reference characters) over simplified characters, punctuation and spaces dropped."""
    ref, hyp = _chars(reference), _chars(hypothesis)
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1], len(ref)


def cer(reference: str, hypothesis: str) -> float:
    edits, chars = char_errors(reference, hypothesis)
    return edits / max(1, chars)


def real_speech(audio_dir: Path, data: Path) -> None:
    """Figure 6: per clip and per profile, error rate and RTF on real speech."""
    clips = real_clips(audio_dir)
    if not clips:
        return
    to_simplified = converter(SIMPLIFIED)
    for pid, profile in PROFILES.items():
        source = resolve.locate_whisper(profile.model, data / "models", None)
        model, _ = load_raw(resolve.ensure_whisper_model(source), profile)
        print(f"[6] {pid} ({profile.model}), {load()}")
        rates: dict[str, list[float]] = {"zh": [], "en": []}
        pooled = [0, 0]  # Mandarin: edits, reference characters over all clips
        decode = audio = 0.0
        for clip in clips:
            if not profile.multilingual and clip["language"] != "en":
                continue
            t0 = time.perf_counter()
            segments, info = model.transcribe(
                str(clip["path"]),
                language=None if profile.multilingual else "en",
                beam_size=profile.beam_size,
                vad_filter=profile.vad_filter,
                vad_parameters={"min_silence_duration_ms": profile.vad_min_silence_ms},
                condition_on_previous_text=profile.condition_on_previous_text,
            )
            pieces = [s.text.strip() for s in segments]
            took = time.perf_counter() - t0
            decode += took
            audio += info.duration
            if info.language in ("zh", "yue"):
                text = "".join(to_simplified(p) for p in pieces)
            else:
                text = " ".join(pieces)
            if clip["language"] == "zh":
                edits, chars = char_errors(clip["reference"], text)
                pooled[0] += edits
                pooled[1] += chars
                rate, name = edits / max(1, chars), "CER"
            else:
                rate, name = speech.wer(clip["reference"], text), "WER"
            rates[clip["language"]].append(rate)
            print(
                f"    {clip['file']:40s} {clip['split']:7s} detected {info.language:3s} {name} {rate:.3f}"
                f"  RTF {took / info.duration:.2f}  {text}"
            )
        summary = ", ".join(
            f"mean {'CER' if lang == 'zh' else 'WER'} ({lang}, {len(v)} clips) {statistics.mean(v):.3f}"
            for lang, v in rates.items()
            if v
        )
        if pooled[1]:
            summary += f", pooled CER (zh) {pooled[0] / pooled[1]:.3f} ({pooled[0]}/{pooled[1]} characters)"
        print(f"[6] {pid}: {summary}; RTF over all clips {decode / max(audio, 1e-9):.2f}")


def first_segment(data: Path, tmp: Path) -> None:
    """Figure 7: cold sidecar → first Segment event of a ≈60 s file with diarization on; then warm."""
    wav = tmp / "sixty.wav"
    turns = speech.conversation(wav, repeat=3)
    seconds = turns[-1].end + speech.GAP_S
    # the base model's one-off assembly (two package parts → one file, once per data directory) is not start-up
    resolve.ensure_whisper_model(resolve.locate_whisper("whisper-base", data / "models", None))
    sc = Sidecar(data, env={"METONA_LOG_LEVEL": "WARNING"})
    try:
        sc.initialize()
        for label in ("cold (worker start + model load)", "warm"):
            att = sc.result("attachments/import", {"path": str(wav)})["attachment_id"]
            t0 = time.perf_counter()
            job = sc.result("media/transcriptions/create", {"attachment_id": att, "diarization": True})
            sub = sc.result("events/subscribe", {"resource_id": job["job_id"]})["subscription_id"]
            seen: dict[str, float] = {}
            while True:
                msg = sc.next(3600)
                if isinstance(msg, dict) and msg.get("method") == "event" and msg["params"]["subscription_id"] == sub:
                    seen.setdefault(msg["params"]["event"], time.perf_counter() - t0)
                    if msg["params"]["event"] == "Segment":
                        seen["last Segment"] = time.perf_counter() - t0
                    if msg["params"]["event"] in {"Completed", "Failed", "Cancelled"}:
                        break
            marks = ", ".join(
                f"{name} {seen[name]:.2f} s"
                for name in ("TranscriptionStarted", "Segment", "last Segment", "DiarizationStarted", "Completed")
                if name in seen
            )
            print(f"[7] {seconds:.0f} s file, default profile, diarization on, {label}: {marks} ({load()})")
    finally:
        sc.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="the conversation repeated N times (≈23 s each)")
    ap.add_argument("--long-minutes", type=float, default=30.0)
    ap.add_argument("--skip-long", action="store_true")
    ap.add_argument("--only-long", action="store_true", help="only figure 5")
    ap.add_argument("--runs", type=int, default=3, help="warm runs per profile (medians)")
    ap.add_argument("--real", action="store_true", help="only figure 6 (real speech, datasets/speech-real)")
    ap.add_argument("--real-dir", type=Path, default=REAL / "audio", help="where the real clips are")
    ap.add_argument("--first-segment", action="store_true", help="only figure 7 (cold start to the first segment)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    tmp = Path(tempfile.mkdtemp(prefix="bench-transcription-"))
    if args.real or args.first_segment:
        data = tmp / "data"
        data.mkdir()
        if args.real:
            real_speech(args.real_dir, data)
        if args.first_segment:
            first_segment(data, tmp)
        return
    wav = tmp / "conversation.wav"
    turns = speech.conversation(wav, repeat=args.repeat)
    duration = turns[-1].end + speech.GAP_S
    reference = " ".join(t.text for t in turns)
    more = tmp / "more.wav"
    more_turns = speech.conversation(more, MORE_TURNS)
    more_ref = " ".join(t.text for t in more_turns)
    print(f"machine: {os.cpu_count()} cores (shared with other work: figures are noisy)")
    print(f"audio: {duration:.1f} s conversation (3 espeak voices), {more_turns[-1].end + 1:.1f} s WER set")

    data = tmp / "data"
    data.mkdir()
    models: dict[str, tuple[Any, float]] = {}
    for pid, profile in PROFILES.items():
        source = resolve.locate_whisper(profile.model, data / "models", None)
        models[pid] = load_raw(resolve.ensure_whisper_model(source), profile)

    sc = Sidecar(data, env={"METONA_LOG_LEVEL": "WARNING"})
    try:
        sc.initialize()
        for pid, profile in PROFILES.items() if not args.only_long else ():
            model, load = models[pid]
            first_raw, _ = raw_transcribe(model, profile, wav)
            cold, _, _ = sidecar_job(sc, wav, profile_id=pid, diarization=False)
            print(
                f"[2] {pid:8s} cold: sidecar {cold:.2f} s (worker start + model load + transcribe) / raw load +"
                f" transcribe {load + first_raw:.2f} s = {cold / (load + first_raw):.3f}x"
            )
            raws, walls, texts = [], [], []
            for _ in range(args.runs):  # alternate, so both see the same load on the shared machine
                t_raw, _ = raw_transcribe(model, profile, wav)
                wall, job, _ = sidecar_job(sc, wav, profile_id=pid, diarization=False)
                raws.append(t_raw)
                walls.append(wall)
                texts.append(job["text"])
            r, w = statistics.median(raws), statistics.median(walls)
            print(
                f"[1] {pid:8s} ({profile.model}): raw faster-whisper load {load:.2f} s, transcribe median {r:.2f} s"
                f" over {args.runs} runs, RTF {r / duration:.3f} (sidecar wall RTF {w / duration:.3f})"
            )
            print(
                f"[2] {pid:8s} warm: sidecar create→Completed median {w:.2f} s / raw median {r:.2f} s = {w / r:.3f}x"
                f" (per run: {', '.join(f'{a / b:.2f}' for a, b in zip(walls, raws, strict=True))})"
            )
            _, wer_job, _ = sidecar_job(sc, more, profile_id=pid, diarization=False)
            w1 = speech.wer(reference, texts[-1])
            w2 = speech.wer(more_ref, wer_job["text"])
            print(f"[4] WER {pid:8s}: conversation {w1:.3f}, second set {w2:.3f}, mean {statistics.mean([w1, w2]):.3f}")
        # diarization: first job builds the pipeline (excluded), the second is timed by its event
        for label in ("first job (build excluded)", "second job") if not args.only_long else ():
            _, job, events = sidecar_job(sc, wav, profile_id="en-fast", diarization=True)
            done = next(e for e in events if e["event"] == "DiarizationCompleted")["data"]["data"]
            speakers = sorted({s["speaker"] for s in job["segments"] if s["speaker"]})
            secs = done["duration_ms"] / 1000
            print(
                f"[3] diarization {label}: {secs:.2f} s for {duration:.1f} s of audio = {secs / duration:.3f}x"
                f" ({secs / (duration / 60):.2f} s per minute), speakers {speakers}"
            )
        if not args.skip_long:
            long_wav = tmp / "long.wav"
            reps = max(1, math.ceil(args.long_minutes * 60 / ((turns[-1].end + speech.GAP_S) / args.repeat)))
            long_turns = speech.conversation(long_wav, repeat=reps)
            long_s = long_turns[-1].end + speech.GAP_S
            pid = worker_pid(sc.proc.pid)
            before = vm_hwm_mb(pid) if pid else float("nan")
            sc.close()  # a fresh sidecar (and worker) for a clean peak
            sc = Sidecar(data, env={"METONA_LOG_LEVEL": "WARNING"})
            sc.initialize()
            wall, job, events = sidecar_job(sc, long_wav, profile_id="en-fast", diarization=True)
            pid = worker_pid(sc.proc.pid)
            peak = vm_hwm_mb(pid) if pid else float("nan")
            print(
                f"[5] {long_s / 60:.1f} min file (en-fast + diarization): wall {wall:.0f} s (RTF {wall / long_s:.3f}),"
                f" worker peak RSS {peak:.0f} MB (short-file worker peak was {before:.0f} MB),"
                f" status {job['status']}, {len(job['segments'])} segments"
            )
    finally:
        sc.close()


if __name__ == "__main__":
    main()
