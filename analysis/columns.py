"""Plain-text tables as the terminal report prints them."""

from __future__ import annotations


def table(headers: list[str], rows: list[list[str]], indent: str = "  ") -> str:
    """Plain-text columns: the first left-aligned, the rest right-aligned (numbers), two spaces
    between columns, a rule of dashes under the header, each line starting with `indent`."""
    lines = [headers] + rows
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    out = []
    for n, line in enumerate(lines):
        out.append(indent + "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                      for i, (c, w) in enumerate(zip(line, widths))).rstrip())
        if n == 0:
            out.append(indent + "  ".join("-" * w for w in widths))
    return "\n".join(out)
