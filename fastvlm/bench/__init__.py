"""Benchmarks: TTFT/decode timing with a bare baseline, the journeys (engine-only and `browser/` through the
page), vision graph comparison, a soak run, and plots."""
