"""Byte counts written for people, in one set of units everywhere a size is printed (`env list`,
`env gc`, `trial show`, a keep error), so the same image never reads as MiB in one place and GB
in another. Decimal units, as Docker prints image sizes."""

from __future__ import annotations


def size_text(n: int | None) -> str:
    """Bytes for people: GB (2 decimals) from 1 GB, MB (1 decimal) from 1 MB, else kB; decimal
    units. None (unknown) is "size unknown"."""
    if n is None:
        return "size unknown"
    if n >= 1e9:
        return f"{n / 1e9:.2f} GB"
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"
