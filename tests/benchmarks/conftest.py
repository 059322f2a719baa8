"""Benchmarks are run with ``python -m tests.benchmarks``, never collected by pytest."""

collect_ignore_glob = ["*"]
