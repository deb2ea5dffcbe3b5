"""analysis.readable: money to the cent and durations with units, unknown as "-"."""

from __future__ import annotations

from analysis.readable import money, seconds


def test_money_is_dollars_to_the_cent_and_a_spent_fraction_of_a_cent_is_not_nothing():
    assert [money(v) for v in (None, 0.0, 0.0123, 1234.567, 0.004, 0.005)] == \
        ["-", "$0.00", "$0.01", "$1,234.57", "< $0.01", "$0.01"]


def test_seconds_carry_their_units_and_change_unit_past_a_minute_and_an_hour():
    assert [seconds(v) for v in (None, 0.44, 40.0, 59.94, 59.96, 125.4, 3599.4, 3599.6, 5400.0)] == \
        ["-", "0.4 s", "40.0 s", "59.9 s", "1 min 0 s", "2 min 5 s", "59 min 59 s", "1 h 0 min", "1 h 30 min"]
