"""The one-pass atom statistics (theory._scan) against the plain numpy expressions they replace, and
the fork safety of the worker threads they run on."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from noisealloc.theory.posterior import _scan
from noisealloc.theory.posterior.asymptotics import live_coordinates

_finite = st.floats(min_value=-1e300, max_value=1e300, allow_nan=False, allow_infinity=False, width=64)


def _reference_hash(atoms):
    # Written from the definition: sum_d m_d * bits(x + 0.0) modulo 2**64, Python integers.
    mult = [int(m) for m in _scan.hash_multipliers(atoms.shape[1])]
    out = []
    for row in atoms:
        bits = (row + 0.0).view(np.uint64)
        out.append(sum(int(b) * m for b, m in zip(bits, mult)) % 2**64)
    return np.array(out, dtype=np.uint64)


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=40), elements=_finite))
def test_scan_equals_the_numpy_expressions(atoms):
    scan = _scan.scan_atoms(atoms)
    np.testing.assert_array_equal(scan.row_hash, _reference_hash(atoms))
    np.testing.assert_array_equal(scan.col_max, atoms.max(axis=0))
    np.testing.assert_array_equal(scan.col_min, atoms.min(axis=0))
    np.testing.assert_array_equal(scan.live, live_coordinates(atoms))


def test_scan_over_many_rows_and_threads():
    # Enough rows for every worker thread and every row range (the small cases above run on one).
    rng = np.random.default_rng(3)
    atoms = rng.normal(size=(5000, 37))
    atoms[:, 5] = 2.5  # a dead coordinate
    atoms[1234] = atoms[17]  # a duplicate row
    atoms[99, 3] = -0.0
    atoms[100] = atoms[99]
    atoms[100, 3] = 0.0  # the same point as row 99
    scan = _scan.scan_atoms(atoms)
    np.testing.assert_array_equal(scan.row_hash, _reference_hash(atoms))
    assert scan.row_hash[1234] == scan.row_hash[17] and scan.row_hash[99] == scan.row_hash[100]
    np.testing.assert_array_equal(scan.col_max, atoms.max(axis=0))
    np.testing.assert_array_equal(scan.col_min, atoms.min(axis=0))
    np.testing.assert_array_equal(scan.live, np.delete(np.arange(37), 5))


def test_scan_propagates_nan():
    atoms = np.zeros((600, 3))
    atoms[400, 1] = np.nan
    scan = _scan.scan_atoms(atoms)
    assert np.isnan(scan.col_max[1]) and np.isnan(scan.col_min[1])
    assert scan.col_max[0] == 0.0 and scan.col_min[2] == 0.0


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 3000), st.integers(1, 12), st.integers(0, 2**32 - 1))
def test_mean_norms_and_projection_agree_with_numpy(k, d, seed):
    rng = np.random.default_rng(seed)
    atoms = rng.normal(size=(k, d)) * 10.0 ** rng.uniform(-100, 100) + rng.normal(size=d)
    w = rng.dirichlet(np.ones(k))
    centre = _scan.weighted_mean(atoms, w)
    np.testing.assert_allclose(centre, w @ atoms, rtol=0, atol=64 * k * np.finfo(float).eps * np.abs(atoms).max())
    ref = np.einsum("kd,kd->k", atoms - centre, atoms - centre)
    np.testing.assert_allclose(_scan.centred_sq_norms(atoms, centre), ref, rtol=4 * d * np.finfo(float).eps)
    g = rng.normal(size=(d, 4))
    np.testing.assert_allclose(_scan.project(atoms, g), atoms @ g, rtol=0,
                               atol=4 * d * np.finfo(float).eps * (np.abs(atoms) @ np.abs(g)).max())


def _forked_model(queue, atoms):
    from noisealloc.theory.models.dirac import DiracMixture

    m = DiracMixture(atoms)
    queue.put([m.total_variance, m.n_atoms])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")
def test_model_statistics_in_a_forked_child():
    """A process that has built a large model forks (process pools do) and the child builds one too:
    numba's OpenMP layer would abort the child; the kept worker threads are remade there."""
    from helpers.forking import run_in_forked_child

    from noisealloc.theory.models.dirac import DiracMixture

    atoms = np.random.default_rng(5).normal(size=(3000, 30))
    parent = DiracMixture(atoms)
    assert run_in_forked_child(_forked_model, atoms) == [parent.total_variance, parent.n_atoms]
