"""Performance benchmarks: ``python -m tests.benchmarks [--quick] [--json PATH]``.

Each workload runs our code and, where one exists, a baseline in the same run, and reports
medians of several repetitions and their ratio, so the result holds on a noisy machine.
They are not part of the test suite (see ``conftest.py``).
"""
