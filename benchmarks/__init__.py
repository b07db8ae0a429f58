"""Runnable benchmarks (not tests): ``python -m benchmarks.first_token`` or ``trio-agent bench``."""
