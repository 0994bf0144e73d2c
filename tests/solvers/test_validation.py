"""Bad input to the solvers (issue 15 item 7): one-line errors naming the argument."""

from __future__ import annotations

import numpy as np
import pytest

from noisealloc.solvers import SingularMomentError, allocation_value, certify, reduce_support, sandwich_value, solve

X = np.linspace(-1, 1, 5)
F = np.stack([np.ones(5), X, X**2], 1)
A = F[:, :, None] * F[:, None, :]
W_OPT = np.array([0.25, 0.0, 0.5, 0.0, 0.25])
ONE_ATOM = np.array([1.0, 0.0, 0.0, 0.0, 0.0])


def test_sandwich_value_refuses_unnormalised_and_negative_weights():
    with pytest.raises(ValueError, match="weights must sum to 1.*sum is .*2.0"):
        sandwich_value(A, A, np.eye(3), 2 * W_OPT)
    with pytest.raises(ValueError, match="weights must be non-negative; min is .*-0.25"):
        sandwich_value(A, A, np.eye(3), np.array([0.5, -0.25, 0.5, 0.0, 0.25]))


def test_singular_allocation_value_is_inf_and_certificates_refuse_it_naming_weights():
    # Decision: a value of a singular allocation is +inf (the criterion's limit); certify and
    # reduce_support have nothing to certify or keep, and raise SingularMomentError (a LinAlgError,
    # which is a ValueError) naming the weights.
    assert sandwich_value(A, A, np.eye(3), ONE_ATOM) == np.inf
    assert allocation_value(A, ONE_ATOM, "A") == np.inf
    for call in (lambda: certify(A, ONE_ATOM, "A"), lambda: reduce_support(A, ONE_ATOM, "A")):
        with pytest.raises(SingularMomentError, match="^weights: the moment matrix M.p. of this allocation is numer"):
            call()
    assert issubclass(SingularMomentError, ValueError)


def test_complex_matrices_are_refused():
    with pytest.raises(ValueError, match="A must be real"):
        solve(A.astype(complex), "A")
    with pytest.raises(ValueError, match="G must be real"):
        solve(A, "sandwich", G=A.astype(complex), A_eval=np.eye(3))


def test_reduce_support_rejects_weights_summing_to_half_like_certify():
    for call in (reduce_support, certify):
        with pytest.raises(ValueError, match="weights must sum to 1.*sum is .*0.5"):
            call(A, W_OPT / 2, "A")


def test_refine_refuses_an_A_fn_of_the_wrong_shape():
    from noisealloc.solvers import refine

    good = lambda t: np.outer([1.0, t, t * t], [1.0, t, t * t])  # noqa: E731
    res = refine(good, [-1.0, 0.0, 1.0], [0.25, 0.5, 0.25], "A", interval=(-1.0, 1.0))
    assert res.value == pytest.approx(8.0, rel=1e-9)
    with pytest.raises(ValueError, match=r"A_fn\(-1.0\) must return a square matrix of shape \(3, 3\); got shape \(2, 2\)"):
        refine(lambda t: np.eye(2), [-1.0, 0.0, 1.0], [0.25, 0.5, 0.25], "L", W=np.eye(3), interval=(-1.0, 1.0))
    with pytest.raises(ValueError, match=r"A_fn\(-1.0\) must return a square matrix of shape \(m, m\); got shape \(3,\)"):
        refine(lambda t: np.ones(3), [-1.0, 0.0, 1.0], [0.25, 0.5, 0.25], "A", interval=(-1.0, 1.0))


def test_certify_e_on_a_singular_one_atom_design_names_the_weights():
    """E is 0 on a singular M(p); its gap is relative to lambda_min, so the certificate refuses (it reported
    rel_gap 9e306).  A nonsingular design is still certified or refused by its gap."""
    x = np.linspace(-1, 1, 11)
    F = np.stack([np.ones(11), x], 1)
    A = F[:, :, None] * F[:, None, :]
    p = np.zeros(11)
    p[0] = 1.0
    with pytest.raises(ValueError, match=r"^weights: the moment matrix M\(p\) .* numerically singular"):
        certify(A, p, "E")
    q = np.zeros(11)
    q[[0, -1]] = 0.5
    cert = certify(A, q, "E")
    assert np.isfinite(cert.rel_gap) and cert.certified  # {-1, 1} equally weighted: M = I, E-optimal


@pytest.mark.parametrize("interval", [(), (1.0,), (0.0, "a"), None, (0.0, float("inf")), (0.0, 1.0, 2.0)])
def test_refine_refuses_a_bad_interval_naming_it(interval):
    from noisealloc.solvers import refine

    with pytest.raises(ValueError, match="interval must be a pair"):
        refine(lambda t: np.eye(1) * (1.0 + t * t), [0.0], [1.0], "L", interval=interval)
