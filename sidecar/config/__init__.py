"""Application settings the host changes at run time (``config/*``): typed keys in SQLite, secrets apart."""
