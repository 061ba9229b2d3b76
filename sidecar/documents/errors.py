"""Document import error codes (issue 31) with their HTTP-like status.

The worker fails a parse with one of these codes and a stable ``details.reason``; :func:`from_worker` turns it
back into the typed error. A worker that dies, hangs past a time limit or breaks the protocol fails the job with
``DOCUMENT_UNREADABLE`` (the input is what crashed or hung it); one that cannot start at all is
``DOCUMENT_IMPORT_FAILED`` (503).
"""

from __future__ import annotations

from typing import Any

from sidecar.core.errors import NotFoundError, PayloadTooLargeError, SidecarError, UnavailableError

DOCUMENT_FORMAT_UNSUPPORTED = "DOCUMENT_FORMAT_UNSUPPORTED"
DOCUMENT_ENCRYPTED = "DOCUMENT_ENCRYPTED"
DOCUMENT_UNREADABLE = "DOCUMENT_UNREADABLE"
DOCUMENT_TOO_LARGE = "DOCUMENT_TOO_LARGE"
DOCUMENT_IMPORT_JOB_NOT_FOUND = "DOCUMENT_IMPORT_JOB_NOT_FOUND"
DOCUMENT_IMPORT_FAILED = "DOCUMENT_IMPORT_FAILED"
DOCUMENT_IMPORT_CANCELLED = "DOCUMENT_IMPORT_CANCELLED"
ATTACHMENT_NOT_FOUND = "ATTACHMENT_NOT_FOUND"


class DocumentFormatUnsupported(SidecarError):
    status = 415
    default_code = DOCUMENT_FORMAT_UNSUPPORTED


class DocumentEncrypted(SidecarError):
    status = 422
    default_code = DOCUMENT_ENCRYPTED


class DocumentUnreadable(SidecarError):
    status = 422
    default_code = DOCUMENT_UNREADABLE


class DocumentTooLarge(PayloadTooLargeError):
    default_code = DOCUMENT_TOO_LARGE


class DocumentImportJobNotFound(NotFoundError):
    default_code = DOCUMENT_IMPORT_JOB_NOT_FOUND


class DocumentImportUnavailable(UnavailableError):
    default_code = DOCUMENT_IMPORT_FAILED


class AttachmentFileMissing(NotFoundError):
    default_code = ATTACHMENT_NOT_FOUND


_FROM_WORKER: dict[str, type[SidecarError]] = {
    DOCUMENT_FORMAT_UNSUPPORTED: DocumentFormatUnsupported,
    DOCUMENT_ENCRYPTED: DocumentEncrypted,
    DOCUMENT_UNREADABLE: DocumentUnreadable,
    DOCUMENT_TOO_LARGE: DocumentTooLarge,
}


def from_worker(code: str, message: str, details: dict[str, Any]) -> SidecarError:
    """The typed error for a parse the worker failed with ``code`` (any other code: unreadable, the code kept in
    the details)."""
    kind = _FROM_WORKER.get(code)
    if kind is None:
        return DocumentUnreadable(message, details={**details, "worker_code": code})
    return kind(message, details=details)
