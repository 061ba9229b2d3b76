"""Knowledge Core: attachments (host files copied into the data directory) and Markdown notes split into
addressable blocks with stable ids and citations (phase-2 §5.4). SQLite is the source of truth; the search
index over the blocks lives in :mod:`sidecar.retrieval`."""
