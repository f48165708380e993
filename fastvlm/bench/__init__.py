"""Benchmarks: TTFT/decode timing with a bare baseline, a soak run, and a plot."""
