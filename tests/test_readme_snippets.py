"""The README's framework snippets run, and their samples follow the schedule's own CDF (issue 7).

Each ```python block whose first line is ``# snippet: NAME`` is executed in a
temporary directory holding a ``schedule.json`` exported by the CLI; the block
must leave ``lam`` (the sampled levels).  A framework that is not installed
skips its snippet; the numpy snippet always runs.
"""

from __future__ import annotations

import importlib.util
import os
import re

import numpy as np
import pytest
from scipy import stats

from noisealloc.cli import main
from noisealloc.theory import tolerances
from noisealloc.theory.schedule_io import load_json

from conftest import REPO_ROOT

SNIPPET = re.compile(r"```python\n# snippet: (\w+)\n(.*?)```", re.S)
SNIPPETS = dict(SNIPPET.findall((REPO_ROOT / "README.md").read_text()))


def test_readme_has_the_three_snippets():
    assert set(SNIPPETS) == {"numpy", "torch", "jax"}


@pytest.fixture(scope="module")
def schedule_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("readme")
    assert main(["schedule", "--from-data", "dirac:K=4,D=1,sep=2,seed=0", "--levels", "65",
                 "--out", str(d / "schedule.json")]) == 0
    return d


@pytest.mark.parametrize("name", ["numpy", "torch", "jax"])
def test_snippet_runs_and_passes_ks(name, schedule_dir):
    if name != "numpy" and importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} is not installed")
    cwd = os.getcwd()
    os.chdir(schedule_dir)
    try:
        ns: dict = {}
        exec(compile(SNIPPETS[name], f"README snippet {name}", "exec"), ns)
    finally:
        os.chdir(cwd)
    lam = np.asarray(ns["lam"], dtype=np.float64)
    assert lam.shape == (4096,)
    sched = load_json(schedule_dir / "schedule.json")
    p = stats.kstest(lam, sched.cdf).pvalue
    assert p > tolerances.KS_ALPHA, f"{name} snippet: KS p = {p:.2e}"
