"""Audio transcription (faster-whisper) and speaker diarization (pyannote.audio) as jobs (phase-2 §5).

The models run in a worker child process (:mod:`sidecar.media.worker`); this package's sidecar side imports
neither torch nor ctranslate2.
"""
