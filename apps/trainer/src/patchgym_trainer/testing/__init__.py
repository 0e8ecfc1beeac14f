"""Helpers for tests, smoke runs and benchmarks, never needed by a real run.

- :mod:`.tiny_model` — a tiny random-weight chat model and tokenizer built offline.
"""
