from __future__ import annotations

import pytest
from pydantic import ValidationError

from sidecar.media.models import METADATA_MAX_BYTES, CreateTranscriptionParams


def test_metadata_is_bounded() -> None:
    ok = CreateTranscriptionParams(attachment_id="a", metadata={"note": "会议" * 100})
    assert ok.metadata["note"].startswith("会议")
    with pytest.raises(ValidationError, match="metadata is larger than 16 KiB"):
        CreateTranscriptionParams(attachment_id="a", metadata={"blob": "x" * METADATA_MAX_BYTES})


def test_language_is_a_whisper_code() -> None:
    assert CreateTranscriptionParams(attachment_id="a", language=" ZH ").language == "zh"
    with pytest.raises(ValidationError):
        CreateTranscriptionParams(attachment_id="a", language="klingon")
