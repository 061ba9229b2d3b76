"""Local storage: the one SQLite database (records, job and trace event logs) and its migrations."""

from .sqlite import DB_FILENAME, Database, StorageCorruptError, StorageError

__all__ = ["DB_FILENAME", "Database", "StorageCorruptError", "StorageError"]
