"""Export error codes (phase-2 §10.5) with their HTTP status, plus one of ours (ipc_schema/README.md "Export").

``EXPORT_FILE_EXPIRED`` is 410 (the file existed and is gone); ``EXPORT_FILE_NOT_READY`` (409, ours) answers
``exports/file`` for a job that is queued, running, failed or cancelled: such a job never returns a file.
"""

from __future__ import annotations

from sidecar.core.errors import BadRequestError, ConflictError, NotFoundError, SidecarError


class ExportSourceNotFound(NotFoundError):
    default_code = "EXPORT_SOURCE_NOT_FOUND"


class ExportFormatUnsupported(BadRequestError):
    default_code = "EXPORT_FORMAT_UNSUPPORTED"


class ExportOptionsInvalid(BadRequestError):
    default_code = "EXPORT_OPTIONS_INVALID"


class ExportRenderFailed(SidecarError):
    status = 500
    default_code = "EXPORT_RENDER_FAILED"


class ExportUnsupportedContent(SidecarError):
    status = 422
    default_code = "EXPORT_UNSUPPORTED_CONTENT"


class ExportJobNotFound(NotFoundError):
    default_code = "EXPORT_JOB_NOT_FOUND"


class ExportFileExpired(SidecarError):
    status = 410
    default_code = "EXPORT_FILE_EXPIRED"


class ExportFileNotReady(ConflictError):
    default_code = "EXPORT_FILE_NOT_READY"
