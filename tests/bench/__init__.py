"""Benchmarks, run by `make bench`: each module has `main()` printing its figures.

Benchmarks are never pass/fail tests: the machines are shared and noisy, so a
figure is reported, with its unit, and compared with its baseline measured in
the same process.
"""
