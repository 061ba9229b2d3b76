#!/usr/bin/env python3
"""The shipped layout against the source install (issue 19): first transcription and first local answer.

    .venv/bin/python scripts/bench/bench_engines.py [--runs 3] [--binary dist/metona/metona-sidecar] \
        [--only binary|venv]

Each run spawns a sidecar on a fresh data directory (the venv's ``python -m sidecar``, then the binary with its
engines folder ``dist/metona/metona-engines/`` beside it) and times, over real stdio:
  * spawn → ``initialize`` answered;
  * the first transcription: ``media/transcriptions/create`` → ``Completed`` of a ≈7 s espeak-ng clip (en-fast =
    tiny.en, with diarization): worker start + model loads + the job;
  * the first local answer: ``chat/stream`` on the ``local`` preset (16 tokens) → its result: worker start +
    model load (the venv reads the model setup converted into .cache/local-model; the binary the engines' copy);
  * peak RSS (VmHWM) of the sidecar and of each worker.
Medians over the runs; prints a Markdown table. Asserts nothing; the machine is shared, figures are noisy.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from sidecar.workers import engines  # noqa: E402
from tests.support import speech  # noqa: E402
from tests.support.sidecar_proc import Sidecar, worker_pids  # noqa: E402

LOCAL_ENV = {"METONA_LOCAL_MODEL_DIR": str(ROOT / ".cache" / "local-model"), "METONA_LOCAL_IDLE_S": "600"}


def vm_hwm_mb(pid: int | None) -> float:
    if pid is None:
        return float("nan")
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def transcribe(sc: Sidecar, wav: Path) -> float:
    att = sc.result("attachments/import", {"path": str(wav)})["attachment_id"]
    t0 = time.perf_counter()
    job = sc.result("media/transcriptions/create", {"attachment_id": att, "profile_id": "en-fast", "diarization": True})
    while True:
        got = sc.result("media/transcriptions/get", {"job_id": job["job_id"]})
        if got["status"] in {"completed", "failed", "cancelled"}:
            break
        time.sleep(0.05)
    assert got["status"] == "completed", got
    return time.perf_counter() - t0


def local_answer(sc: Sidecar) -> float:
    sc.result("providers/create", {"preset": "local"})
    request = {
        "meta": {"sessionId": "bench", "iteration": 1, "requestId": "r1", "timestamp": 1, "agentVersion": "bench"},
        "systemPrompt": {"roleDefinition": "You are terse.", "outputConstraints": "", "safetyGuidelines": ""},
        "messages": [{"role": "user", "content": "Say hello.", "timestamp": 1}],
        "params": {"stream": True, "maxTokens": 16},
    }
    t0 = time.perf_counter()
    rid = sc.request("chat/stream", {"provider_id": "local", "request": request})
    reply = sc.response(rid, timeout=900)
    assert "result" in reply, reply
    return time.perf_counter() - t0


def one_run(cmd: str | None, wav: Path) -> dict[str, float]:
    if cmd:
        os.environ["SIDECAR_CMD"] = cmd
    else:
        os.environ.pop("SIDECAR_CMD", None)
    with tempfile.TemporaryDirectory(prefix="metona-bench-engines-") as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        t0 = time.perf_counter()
        sc = Sidecar(data, env=LOCAL_ENV)
        try:
            init = sc.initialize()
            out = {"initialize_s": time.perf_counter() - t0}
            comps = init["capabilities"]["components"]
            assert comps["transcription"]["available"] and comps["local_model"]["available"], comps
            out["transcription_s"] = transcribe(sc, wav)
            (media,) = worker_pids(sc.proc.pid, "sidecar.media.worker", "media-worker")
            out["media_worker_rss_mb"] = vm_hwm_mb(media)
            out["local_answer_s"] = local_answer(sc)
            (local,) = worker_pids(sc.proc.pid, "sidecar.localmodel.worker", "local-model-worker")
            out["local_worker_rss_mb"] = vm_hwm_mb(local)
            out["sidecar_rss_mb"] = vm_hwm_mb(sc.proc.pid)
        finally:
            sc.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--binary", default=str(ROOT / engines.SHIPPED_BINARY))
    ap.add_argument("--only", choices=["binary", "venv"])
    ns = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="metona-bench-audio-") as tmp:
        wav = Path(tmp) / "meeting.wav"
        speech.conversation(wav, speech.TURNS[:2])
        setups = {"venv": None, "binary": ns.binary}
        results: dict[str, list[dict[str, float]]] = {}
        for name, cmd in setups.items():
            if ns.only and name != ns.only:
                continue
            results[name] = []
            for i in range(ns.runs):
                run = one_run(cmd, wav)
                print(f"{name} run {i + 1}: " + ", ".join(f"{k}={v:.2f}" for k, v in run.items()), flush=True)
                results[name].append(run)
    keys = list(next(iter(results.values()))[0])
    print(f"\n| figure (median of {ns.runs}) | {' | '.join(results)} |")
    print("|---|" + "---|" * len(results))
    for key in keys:
        medians = [f"{statistics.median(r[key] for r in runs):.2f}" for runs in results.values()]
        print(f"| {key} | {' | '.join(medians)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
