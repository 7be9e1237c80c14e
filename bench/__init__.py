"""Benchmarks (not tests): each prints one JSON line per figure and a readable table."""
