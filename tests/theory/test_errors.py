"""Input checks and warnings of noisealloc.theory.errors: each names the argument, the value and what is allowed."""

from __future__ import annotations

import numpy as np
import pytest

from noisealloc.theory import errors as E


def test_warning_hierarchy():
    assert issubclass(E.ConvergenceWarning, E.NoiseallocWarning)
    assert issubclass(E.RegularizationWarning, E.NoiseallocWarning)
    assert issubclass(E.NoiseallocWarning, UserWarning)
    with pytest.warns(E.NoiseallocWarning):
        import warnings

        warnings.warn("x", E.ConvergenceWarning)


def test_as_float_array():
    a = E.as_float_array([1, 2, 3], "x", ndim=1, shape=(3,))
    assert a.dtype == np.float64 and a.tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(TypeError, match=r"x must be an array of real numbers; got 'abc'"):
        E.as_float_array("abc", "x")
    with pytest.raises(ValueError, match=r"x must have 2 dimension\(s\); got shape \(3,\)"):
        E.as_float_array([1, 2, 3], "x", ndim=2)
    with pytest.raises(ValueError, match=r"x must have shape \(2, None\).*got \(3, 4\)"):
        E.as_float_array(np.zeros((3, 4)), "x", shape=(2, None))
    assert E.as_float_array(np.zeros((2, 7)), "x", shape=(2, None)).shape == (2, 7)


def test_as_float_scalar():
    """One real number, or a one-line error naming the argument (issue 28 item 7)."""
    assert E.as_float_scalar(2, "sd") == 2.0 and type(E.as_float_scalar(2, "sd")) is float
    assert E.as_float_scalar(np.float32(0.5), "sd") == 0.5 and E.as_float_scalar(np.array(3.0), "sd") == 3.0
    assert np.isnan(E.as_float_scalar(float("nan"), "sd"))  # finiteness is the caller's check
    for z in (1 + 0j, np.complex128(1.0), np.array(1.0 + 0j)):  # float() would cut the numpy ones silently
        with pytest.raises(ValueError, match=r"^sd must be real; got a complex number \(1\+0j\)$"):
            E.as_float_scalar(z, "sd")
    with pytest.raises(ValueError, match=r"^sd must be real; got a complex array$"):
        E.as_float_scalar(np.array([1.0 + 0j]), "sd")
    with pytest.raises(ValueError, match=r"^sd must be a single number; got an array of shape \(1,\)$"):
        E.as_float_scalar([1.0], "sd")
    for bad, shown in ((None, "None"), ("abc", "'abc'"), (object(), "<object")):
        with pytest.raises(TypeError, match=rf"^sd must be a real number; got {shown}"):
            E.as_float_scalar(bad, "sd")


def test_as_int_scalar():
    """int() of an integer parameter, or a one-line error naming it (int()'s own conversion of reals is kept)."""
    assert E.as_int_scalar(np.int64(3), "n") == 3 and type(E.as_int_scalar(np.int64(3), "n")) is int
    assert E.as_int_scalar(3.0, "n") == 3
    for z in (1 + 0j, np.complex128(2.0)):
        with pytest.raises(ValueError, match=r"^n must be a real integer; got a complex number$"):
            E.as_int_scalar(z, "n")
    with pytest.raises(ValueError, match=r"^n must be a single integer; got an array of shape \(2,\)$"):
        E.as_int_scalar([3, 4], "n")
    for bad, exc in ((None, TypeError), (object(), TypeError), (float("nan"), ValueError), (float("inf"), ValueError)):
        with pytest.raises(exc, match=r"^n must be an integer; got "):
            E.as_int_scalar(bad, "n")


def test_checks_refuse_complex_naming_the_argument():
    with pytest.raises(ValueError, match=r"^iv must be two real numbers \(lo, hi\); got a complex end point"):
        E.check_interval(np.complex128(0.0), 1.0, "iv")
    for check in (E.check_positive, E.check_nonnegative):
        with pytest.raises(ValueError, match=r"^sd must be real; got a complex array$"):
            check(np.array([1.0 + 0j]), "sd")


def test_check_finite():
    E.check_finite(np.array([0.0, 1.0]), "v")
    with pytest.raises(ValueError, match=r"^v must be finite; entry 1 is nan$"):
        E.check_finite(np.array([0.0, np.nan]), "v")
    with pytest.raises(ValueError, match=r"^v must be finite; entry \(0, 1\) is inf$"):
        E.check_finite(np.array([[0.0, np.inf]]), "v")


def test_check_choice():
    assert E.check_choice("a", "mode", ("a", "b")) == "a"
    with pytest.raises(ValueError, match=r"mode must be one of 'a', 'b'; got 'c'"):
        E.check_choice("c", "mode", ("a", "b"))
    with pytest.raises(ValueError, match=r"mode must be one of 'a', 'b'; got 1"):
        E.check_choice(1, "mode", ("a", "b"))


@pytest.mark.parametrize(
    "lo,hi,exc,match",
    [
        (1.0, 0.0, ValueError, r"iv must satisfy lo < hi .*got \(1.0, 0.0\)"),
        (1.0, 1.0, ValueError, r"iv must satisfy lo < hi .*got \(1.0, 1.0\)"),
        (np.nan, 1.0, ValueError, r"iv must not contain NaN"),
        (-np.inf, 1.0, ValueError, r"iv must be finite"),
        ("a", 1.0, TypeError, r"iv must be two real numbers"),
    ],
)
def test_check_interval_bad(lo, hi, exc, match):
    with pytest.raises(exc, match=match):
        E.check_interval(lo, hi, "iv")


def test_check_interval_good():
    assert E.check_interval(-1, 2) == (-1.0, 2.0)
    assert E.check_interval(-np.inf, 2, allow_infinite=True) == (-np.inf, 2.0)


def test_check_positive_and_nonnegative():
    E.check_positive([1.0, 2.0], "w")
    E.check_nonnegative([0.0, 2.0], "w")
    with pytest.raises(ValueError, match=r"w must be > 0 everywhere; entry 1 is .*0\.0"):
        E.check_positive([1.0, 0.0], "w")
    with pytest.raises(ValueError, match=r"w must be >= 0 everywhere; entry 0 is .*-1\.0"):
        E.check_nonnegative([-1.0, 0.0], "w")
    with pytest.raises(ValueError, match="w must be finite"):
        E.check_positive([np.nan], "w")
    with pytest.raises(ValueError, match="w must be finite"):
        E.check_nonnegative([np.inf], "w")


def test_as_generator():
    g = np.random.default_rng(5)
    assert E.as_generator(g) is g
    a = E.as_generator(42).random(5)
    b = E.as_generator(np.int64(42)).random(5)
    np.testing.assert_array_equal(a, b)  # same seed -> same stream
    assert not np.array_equal(a, E.as_generator(43).random(5))
    assert isinstance(E.as_generator(None), np.random.Generator)
    assert not np.array_equal(E.as_generator(None).random(5), E.as_generator(None).random(5))
    with pytest.raises(ValueError, match="rng seed must be a non-negative integer; got -1"):
        E.as_generator(-1)
    with pytest.raises(TypeError, match="rng must be a numpy.random.Generator, an int seed or None; got float"):
        E.as_generator(1.5)
    with pytest.raises(TypeError, match="got RandomState"):
        E.as_generator(np.random.RandomState(0))


def test_bool_is_not_a_seed():
    with pytest.raises(TypeError, match="got the bool True"):
        E.as_generator(True)


def test_complex_input_is_refused_not_truncated():
    import numpy as np
    import pytest

    from noisealloc.theory.errors import as_float_array

    with pytest.raises(ValueError, match="x must be real; got a complex array"):
        as_float_array(np.array([1.0 + 0.5j, 2.0]), "x")
    with pytest.raises(ValueError, match="must be real"):
        as_float_array([1j], "x")
    assert as_float_array(np.array([1.0 + 0j]).real, "x").tolist() == [1.0]
