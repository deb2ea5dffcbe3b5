"""Numbers as a person reads them on a page (the HTML report): money in dollars to the cent,
durations with their units. The CSV keeps the exact values; these strings are for reading only.
Unknown (None) is "-", never 0."""

from __future__ import annotations


def money(usd: float | None) -> str:
    """US dollars to the cent: "$1,234.57"; a cost above 0 that rounds to no cent is
    "< $0.01" (it was spent, so it is not shown as nothing); None is "-"."""
    if usd is None:
        return "-"
    if 0 < usd < 0.005:
        return "< $0.01"
    return f"-${-usd:,.2f}" if usd < 0 else f"${usd:,.2f}"


def seconds(s: float | None) -> str:
    """A duration with its units: "0.4 s" and "12.3 s" under a minute (one decimal), "2 min 5 s"
    under an hour, "1 h 2 min" from an hour on (whole units, rounded); None is "-"."""
    if s is None:
        return "-"
    if s < 59.95:
        return f"{s:.1f} s"
    whole = round(s)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    minutes = round(s / 60)
    return f"{minutes // 60} h {minutes % 60} min"
