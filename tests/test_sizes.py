"""Byte counts for people: one set of decimal units wherever a size is printed."""

from reb_ray.sizes import size_text


def test_decimal_units_with_their_precision_and_unknown_in_words():
    assert size_text(None) == "size unknown"
    assert size_text(0) == "0 kB" and size_text(999_499) == "999 kB"
    assert size_text(1_000_000) == "1.0 MB" and size_text(879_400_000) == "879.4 MB"
    assert size_text(1_000_000_000) == "1.00 GB" and size_text(1_745_000_000) == "1.75 GB"
    assert size_text(3 * 2**20) == "3.1 MB"  # a MiB count is not printed as if it were MB
