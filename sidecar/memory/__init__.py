"""Memory (IR MetonaMemoryItem) stored in LanceDB: add, get, search, list, delete, compact, supersession."""
