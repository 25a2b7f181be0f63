"""Benchmark bundles in and out: import (validate, then write all or nothing) and export.

Above questions/ and scoring/ (it writes both, and core's audit log): see bundles/.
"""
