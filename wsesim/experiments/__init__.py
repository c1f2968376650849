"""Composition: load → plan → simulate → measure (the runner), the (G, B) tuner, and sweeps."""
