"""``metona-sidecar transcribe FILE``: the transcription service for people (progress on stderr, transcript on
stdout).

The first words show within seconds: with ``--format text`` and no diarization each line goes to stdout as soon as
it is recognised (the transcript is those lines); otherwise each recognised line is shown on stderr as it comes,
and the finished transcript (with speakers, or as SRT/WebVTT/JSON) goes to stdout at the end.

It runs the same :class:`~sidecar.media.service.MediaService`, JobManager and worker process as the sidecar
(built by :func:`sidecar.wiring.open_transcriber`), over a throw-away database (the file is not added to the
user's data); only the models folder of the data directory is shared, so the base model is assembled once for both.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

from sidecar.media.formats import FORMATS
from sidecar.media.notes import clock

from .output import bar, start_cli


def _parser() -> argparse.ArgumentParser:
    from sidecar.media.models import PROFILES

    p = argparse.ArgumentParser(prog="metona-sidecar transcribe", description="Transcribe an audio file.")
    p.add_argument("file", type=Path, help="wav, mp3, m4a/aac, ogg/opus, flac or webm")
    p.add_argument("--profile", default="default", choices=sorted(PROFILES), help="server-side profile")
    p.add_argument("--language", default=None, help="a Whisper language code (default: detect)")
    p.add_argument(
        "--locale", default=None, help="the reader's locale: zh-TW, zh-HK, zh-Hant → traditional Chinese characters"
    )
    p.add_argument("--diarize", action="store_true", help="label speakers (pyannote.audio)")
    p.add_argument("--words", action="store_true", help="word timestamps (json output)")
    p.add_argument("--format", default="text", choices=FORMATS, help="output on stdout")
    p.add_argument("--data-dir", type=Path, default=None, help="where models/ lives (env METONA_DATA_DIR)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def _bar(percent: float | None, phase: str, width: int = 30) -> str:
    if percent is None:
        return f"\r{phase:<24}"
    return bar(percent, f"{phase:<14}", width)


async def _run(ns: argparse.Namespace) -> int:
    from sidecar.core.errors import SidecarError
    from sidecar.core.settings import Settings, default_data_dir
    from sidecar.media.formats import render
    from sidecar.media.models import CreateTranscriptionParams
    from sidecar.wiring import open_transcriber

    env_dir = os.environ.get("METONA_DATA_DIR")
    data_dir = (ns.data_dir or (Path(env_dir) if env_dir else default_data_dir())).expanduser().resolve()
    whisper_dir = os.environ.get("METONA_WHISPER_MODEL_DIR")
    diar_dir = os.environ.get("METONA_DIARIZATION_MODEL_DIR")
    settings = Settings(
        data_dir=data_dir,
        whisper_model_dir=Path(whisper_dir) if whisper_dir else None,
        diarization_model_dir=Path(diar_dir) if diar_dir else None,
    )
    with tempfile.TemporaryDirectory(prefix="metona-transcribe-") as tmp:
        async with open_transcriber(settings, Path(tmp)) as tool:
            log, knowledge, media = tool.events, tool.knowledge, tool.media
            try:
                att = await knowledge.import_attachment(str(ns.file.expanduser().resolve()))
                params = CreateTranscriptionParams(
                    attachment_id=att.attachment_id,
                    language=ns.language,
                    diarization=ns.diarize,
                    word_timestamps=ns.words,
                    profile_id=ns.profile,
                    locale=ns.locale,
                )
                job = await media.create(params)
                live = ns.format == "text" and not ns.diarize  # the streamed lines are the transcript
                with log.listen(job.job_id) as events:
                    current = await media.get(job.job_id)
                    while not current.status.terminal:
                        with anyio.move_on_after(0.5):
                            ev = await events.receive()
                            if ev.event == "Segment":
                                _show_segment(ev.data, live, ns.quiet)
                            elif not ns.quiet:
                                pct = ev.data.get("percent") if ev.event == "Progress" else None
                                sys.stderr.write(_bar(pct, ev.event if ev.event != "Progress" else "transcribing"))
                                sys.stderr.flush()
                        current = await media.get(job.job_id)
                if not ns.quiet:
                    sys.stderr.write("\n")
            except SidecarError as exc:
                sys.stderr.write(f"error: {exc.code}: {exc.message}\n")
                return 2
            for w in current.warnings:
                sys.stderr.write(f"warning: {w.code}: {w.message} ({w.details.get('reason', '')})\n")
            if current.error is not None:
                detail = current.error.details.get("reason", "")
                sys.stderr.write(f"error: {current.error.code}: {current.error.message} {detail}\n")
                return 1
            if not live:
                sys.stdout.write(render(current, ns.format))
                sys.stdout.flush()
            return 0


def _show_segment(data: dict[str, Any], live: bool, quiet: bool) -> None:
    """A recognised segment as it comes: the transcript's line on stdout (``live``), else a line on stderr."""
    text = str(data.get("text", ""))
    if live:
        sys.stdout.write(f"{text}\n")
        sys.stdout.flush()
    elif not quiet:
        sys.stderr.write(f"\r\x1b[K[{clock(float(data.get('start_time', 0.0)))}] {text}\n")
        sys.stderr.flush()


def main(argv: list[str]) -> int:
    start_cli()
    ns = _parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        return anyio.run(_run, ns)
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted\n")
        return 130
