"""The number formats of ui.format that a class reads in prose: significant digits, scientific notation, sums."""
import math

import pytest

from ui import format as fmt


@pytest.mark.parametrize("x, text", [
    (1149.1, "1,150"), (10679, "10,700"), (9.293, "9.29"), (1079.2, "1,080"), (9.996, "10.0"), (999.6, "1,000"),
    (0.04213, "0.0421"), (7.2, "7.20"), (-3.456, "−3.46"), (0, "0"), (2.4e-7, "2.40 × 10⁻⁷"),
])
def test_approx_keeps_three_significant_digits(x, text):
    assert fmt.approx(x) == text


def test_approx_rounds_to_within_half_a_unit_of_its_last_digit():
    for x in (1.2345, 56.789, 1234.5, 98765.4, 0.012345, 3.0e6, 0.5):
        shown = float(fmt.approx(x).replace(",", "").replace("−", "-"))
        last = 10 ** (math.floor(math.log10(abs(x))) - 2)
        assert abs(shown - x) <= last / 2 + 1e-12, (x, shown)


@pytest.mark.parametrize("x, text", [(6e-8, "6.0 × 10⁻⁸"), (1.19e-7, "1.2 × 10⁻⁷"), (0.0, "0"),
                                     (-2.5e-3, "−2.5 × 10⁻³"), (123456, "1.2 × 10⁵")])
def test_sci(x, text):
    assert fmt.sci(x) == text


def test_sum_error_quotes_the_largest_distance_from_one():
    assert fmt.sum_error([0.9999999, 1.0, 1.00000005]) == "1.0 × 10⁻⁷"
    assert fmt.sum_error([1.0, 1.0]) == "0"
    assert fmt.sum_error([0.97, 1.0]) == "3.0 × 10⁻²"
