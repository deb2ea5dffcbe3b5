"""What a viewer page shows, read back with the standard library's HTML parser (as a browser
builds it): tables by id or class as rows of cell texts, links, <pre> texts, scripts."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser


@dataclass
class Page:
    tables: dict = field(default_factory=dict)  # id or first class -> [[cell text]]
    links: list = field(default_factory=list)  # [{"href", "class", "title", "text"}]
    pres: list = field(default_factory=list)
    scripts: int = 0
    text: str = ""


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = Page()
        self.table: list | None = None
        self.row: list | None = None
        self.cell: list | None = None
        self.link: dict | None = None
        self.pre: list | None = None
        self.texts: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.table = self.page.tables.setdefault(a.get("id") or (a.get("class") or "").split(" ")[0], [])
        elif tag == "tr" and self.table is not None:
            self.row = []
            self.table.append(self.row)
        elif tag in ("td", "th") and self.row is not None:
            self.cell = []
        elif tag == "a":
            self.link = {"href": a.get("href"), "class": a.get("class") or "", "title": a.get("title"), "text": ""}
            self.page.links.append(self.link)
        elif tag == "pre":
            self.pre = []
        elif tag == "script":
            self.page.scripts += 1

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None and self.row is not None:
            self.row.append(" ".join("".join(self.cell).split()))
            self.cell = None
        elif tag == "table":
            self.table = self.row = None
        elif tag == "a":
            self.link = None
        elif tag == "pre" and self.pre is not None:
            self.page.pres.append("".join(self.pre))
            self.pre = None

    def handle_data(self, data):
        self.texts.append(data)
        for sink in (self.cell, self.pre):
            if sink is not None:
                sink.append(data)
        if self.link is not None:
            self.link["text"] += data


def parse(html: str) -> Page:
    p = _Parser()
    p.feed(html)
    p.page.text = " ".join("".join(p.texts).split())
    return p.page


def squares(page: Page) -> list[dict]:
    """The matrix's trial squares (links of class `sq`)."""
    return [link for link in page.links if "sq" in link["class"].split()]
