"""Domain and services. Imports neither textual nor rich (a test proves it)."""
