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
from noisealloc.theory.schedules.io import load_json

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


def _readme_schedule_commands(prefix="noisealloc schedule "):
    blocks = re.findall(r"```bash\n(.*?)```", (REPO_ROOT / "README.md").read_text(), re.S)
    lines = [l.split("#")[0].strip() for b in blocks for l in b.splitlines()]
    return [l.split()[1:] for l in lines if l.startswith(prefix)]


def test_readme_has_schedule_commands():
    cmds = _readme_schedule_commands()
    assert len(cmds) >= 3 and any("--from-losses" in c for c in cmds) and any("--plot" in c for c in cmds)


@pytest.mark.slow
def test_every_readme_schedule_command_exits_0(tmp_path):
    """Issue 13, acceptance 1: each `noisealloc schedule` line of the README, in order, in a fresh folder
    (losses.csv: per-sample losses of a 1-D Gaussian, as a training loop logs them)."""
    rng = np.random.default_rng(0)
    lam = rng.uniform(-8.0, 8.0, 20_000)
    loss = rng.chisquare(1, lam.size) / (1.0 + np.exp(lam))
    (tmp_path / "losses.csv").write_text("lam,loss_x0\n" + "".join(f"{a:.8g},{b:.8g}\n" for a, b in zip(lam, loss)))
    # masked cross-entropies of a product law of 3 nats per string, one row per level
    grid = np.linspace(-8.0, 8.0, 33)
    (tmp_path / "masked_losses.csv").write_text(
        "lam,loss_ce\n" + "".join(f"{a:.8g},{3.0 / (1.0 + np.exp(a)):.8g}\n" for a in grid))
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        for argv in _readme_schedule_commands() + [a for a in _readme_schedule_commands("noisealloc entropy ")
                                                   if "--process" in a]:
            assert main(argv) == 0, argv
    finally:
        os.chdir(cwd)
