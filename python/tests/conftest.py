"""Shared fixtures: a seeded random generator whose seed a failure prints
(rerun one with LIBDML_TEST_SEED=<seed>)."""
import os
import random

import numpy as np
import pytest


@pytest.fixture
def rng(request):
    seed = int(os.environ.get("LIBDML_TEST_SEED", random.randrange(2**32)))
    request.node.libdml_seed = seed
    return np.random.default_rng(seed)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    seed = getattr(item, "libdml_seed", None)
    if report.failed and seed is not None:
        report.sections.append(("libdml", f"random inputs from LIBDML_TEST_SEED={seed}"))
