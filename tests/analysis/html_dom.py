"""Read back what the HTML report shows (its file, or the DOM a browser dumped): the tables by
section, agent and column, the per-trial drill-down, images, links, scripts and <pre> texts.
Standard library only (html.parser), so a test reads the page as a browser builds it."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass
class Page:
    """tables: {(sweep, section): {agent: {column: text}}}; trials: [{"attrs", "badges": {label:
    outcome class}, "summary": text}]; images: every img src; hrefs: every a/link href;
    scripts: <script> elements; pres: {class: [text]}; metas: [attrs]; text: all text."""

    tables: dict = field(default_factory=dict)
    trials: list = field(default_factory=list)
    images: list = field(default_factory=list)
    hrefs: list = field(default_factory=list)
    scripts: int = 0
    pres: dict = field(default_factory=dict)
    metas: list = field(default_factory=list)
    text: str = ""


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = Page()
        self.stack: list[tuple[str, dict, list[str]]] = []
        self.all_text: list[str] = []

    def _find(self, tag: str) -> dict | None:
        return next((a for t, a, _ in reversed(self.stack) if t == tag), None)

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        p = self.page
        if tag == "img":
            p.images.append(a.get("src"))
        elif tag in ("a", "link"):
            p.hrefs.append(a.get("href"))
        elif tag == "script":
            p.scripts += 1
        elif tag == "meta":
            p.metas.append(a)
        elif tag == "details" and "trial" in a.get("class", "").split():
            p.trials.append({"attrs": a, "badges": {}, "summary": ""})
        if tag not in VOID:
            self.stack.append((tag, a, []))

    def handle_endtag(self, tag):
        while self.stack:
            t, a, buf = self.stack.pop()
            text = "".join(buf)
            if self.stack:
                self.stack[-1][2].append(text)
            if t == tag:
                self._close(t, a, text)
                return

    def handle_data(self, data):
        self.all_text.append(data)
        if self.stack:
            self.stack[-1][2].append(data)

    def _close(self, tag: str, a: dict, text: str) -> None:
        p = self.page
        classes = a.get("class", "").split()
        if tag == "td" and "data-col" in a:
            tr, table, section = self._find("tr"), self._find("table"), self._find("section")
            if tr and table and "data-agent" in tr and "data-section" in table:
                sweep = (section or {}).get("data-sweep")
                p.tables.setdefault((sweep, table["data-section"]), {}).setdefault(tr["data-agent"], {})[a["data-col"]] = text
        elif tag == "span" and "badge" in classes and p.trials:
            p.trials[-1]["badges"][text] = classes[1]
        elif tag == "summary" and p.trials and self._find("details") is p.trials[-1]["attrs"]:
            p.trials[-1]["summary"] = " ".join(text.split())
        elif tag == "pre":
            for c in classes:
                p.pres.setdefault(c, []).append(text)


def parse(html: str) -> Page:
    """The Page of an HTML text."""
    parser = _Parser()
    parser.feed(html)
    parser.close()
    parser.page.text = "".join(parser.all_text)
    return parser.page
