"""Partial-coupling sweep (docs/THEORY.md §4 (c))."""

from __future__ import annotations

import json

import numpy as np
import pytest

from noisealloc.verify import checks
from noisealloc.verify.experiments.coupling import AtomSchedule, coupling_sweep, grid_entropic_weights


@pytest.mark.parametrize("lam0", [-3.0, 0.0, 1.7])
def test_w1_of_point_mass_against_uniform(lam0):
    from noisealloc.theory.schedules.base import TabulatedSchedule
    from noisealloc.verify.checks.loss_recovery import w1_lambda

    a, b = -4.0, 4.0
    uni = TabulatedSchedule([a, b], [1.0, 1.0])
    exact = ((lam0 - a) ** 2 + (b - lam0) ** 2) / (2 * (b - a))  # int |F_atom - F_uniform|
    got = w1_lambda(AtomSchedule([lam0], [1.0], (a, b)), uni, n=100001)
    assert abs(got - exact) <= 2 * (b - a) / 100000


def test_grid_entropic_weights():
    lam = np.array([0.0, 1.0, 3.0])
    h = np.array([4.0, 1.0, 9.0])
    w = grid_entropic_weights(lam, h)
    ref = np.sqrt(h) * np.array([0.5, 1.5, 1.0])
    np.testing.assert_allclose(w, ref / ref.sum(), rtol=1e-14)
    with pytest.raises(ValueError, match="zero"):
        grid_entropic_weights(lam, np.zeros(3))


def test_sweep_rows_are_certified_and_plottable():
    rep = coupling_sweep(checks.default_gaussian(), (1, 2, 4), criterion="sandwich", lam=np.linspace(-6, 6, 49))
    assert [r["J"] for r in rep.rows] == [1, 2, 4]
    for r in rep.rows:
        assert r["n_atoms_reduced"] <= r["atom_bound"]
        assert r["efficiency"] <= 1 + 1e-9 and r["w1"] >= 0
        np.testing.assert_allclose(np.sum(r["weights"]), 1.0, rtol=1e-12)
    doc = json.loads(json.dumps(rep.to_dict(), allow_nan=False))
    assert doc["rows"][0]["m"] == 2 and len(doc["lam"]) == 49
    assert "J" in rep.table()


def test_sweep_is_deterministic():
    model = checks.default_dirac()
    kw = dict(lam=np.linspace(-4, 4, 17), criterion="L", family="random-features", rng=5)
    a = coupling_sweep(model, (1, 2), **kw)
    b = coupling_sweep(model, (1, 2), **kw)
    for ra, rb in zip(a.rows, b.rows):
        np.testing.assert_array_equal(ra["weights"], rb["weights"])


def test_sweep_bad_input():
    with pytest.raises(ValueError, match="criterion"):
        coupling_sweep(checks.default_gaussian(), (1,), criterion="X")
    with pytest.raises(ValueError, match="J_values"):
        coupling_sweep(checks.default_gaussian(), (0,))


@pytest.mark.slow
def test_sandwich_sweep_approaches_the_entropic_density_on_a_gaussian_manifold():
    # docs/THEORY.md §4 (c): few basis functions give few atoms far from the entropic density; many track it.
    rep = coupling_sweep(checks.default_gaussian(), (1, 2, 4, 8, 16, 32), criterion="sandwich")
    w1 = [r["w1"] for r in rep.rows]
    eff = [r["efficiency"] for r in rep.rows]
    atoms = [r["n_atoms"] for r in rep.rows]
    assert atoms[0] <= 2 and atoms[-1] > 10 * atoms[0]
    assert w1[-1] < 0.2 * w1[0]
    assert eff[-1] > 10 * eff[0]


def test_a_J_without_allocation_is_a_failing_row_not_an_exception(monkeypatch):
    """optimize_allocation reports a numerically singular problem as status 4; the sweep keeps it as a row
    whose risk is infinite (so no check can pass on it) and lists it in ``errors``."""
    import noisealloc.solvers as S

    import noisealloc.solvers.pipeline as pipeline
    from noisealloc.solvers.criteria import SingularMomentError

    real, real_solve = S.optimize_allocation, pipeline.solve

    def singular_solve(*args, **kwargs):
        # Preconditioning leaves no small natural instance whose solve lands on the singular boundary.
        raise SingularMomentError("moment matrix is singular in floating point")

    def fake(source, criterion, **kw):
        if source.info.get("J") != 2:
            return real(source, criterion, **kw)
        pipeline.solve = singular_solve
        try:
            return real(source, criterion, **kw)
        finally:
            pipeline.solve = real_solve

    monkeypatch.setattr(S, "optimize_allocation", fake)
    rep = coupling_sweep(checks.default_gaussian(), (1, 2), criterion="sandwich", lam=np.linspace(-6, 6, 25))
    ok, bad = rep.rows
    assert ok["status"] == 0 and ok["error"] is None and np.isfinite(ok["value"])
    assert bad["status"] == 4 and bad["value"] == np.inf and bad["efficiency"] == np.inf and bad["n_atoms"] == 0
    assert rep.errors == [{"J": 2, "error": bad["error"]}] and bad["error"].startswith("SingularMomentError")
