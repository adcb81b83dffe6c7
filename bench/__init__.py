"""Benchmarks: each measures a baseline in the same run and reports the ratio. Run with `make bench`."""
