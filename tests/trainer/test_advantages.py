import numpy as np
import pytest

from flywheel.trainer.advantages import ADVANTAGES


def test_known_values():
    r = np.array([1.0, 0.0, 0.0, 1.0])
    np.testing.assert_allclose(ADVANTAGES.get("grpo")(r), [1, -1, -1, 1], atol=1e-5)
    np.testing.assert_allclose(ADVANTAGES.get("dr_grpo")(r), [0.5, -0.5, -0.5, 0.5])
    np.testing.assert_allclose(ADVANTAGES.get("rloo")(np.array([1.0, 0.0, 0.0])), [1, -0.5, -0.5])


@pytest.mark.parametrize("name", ["grpo", "dr_grpo", "rloo"])
def test_zero_variance_group_has_no_advantage(name):
    fn = ADVANTAGES.get(name)
    np.testing.assert_array_equal(fn(np.full(8, 0.7)), np.zeros(8))
    assert fn(np.array([1.0])).shape == (1,)
    assert abs(fn(np.array([0.2, 0.9, 0.4])).sum()) < 1e-9  # group-relative: sums to zero


def test_registry_refuses_duplicates_and_names_unknowns():
    with pytest.raises(ValueError):
        ADVANTAGES.register("grpo")(lambda r: r)
    with pytest.raises(KeyError, match="grpo"):
        ADVANTAGES.get("nope")
