"""Reading the dashboard's pages as an operator reads them: the cells of a table's rows, the
text of an element, the links."""

from __future__ import annotations

from html.parser import HTMLParser


class _Rows(HTMLParser):
    def __init__(self, row_class: str) -> None:
        super().__init__()
        self.row_class = row_class
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self._in_row = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = (dict(attrs).get("class") or "").split()
        if tag == "tr" and self.row_class in classes:
            self._in_row = True
            self.rows.append([])
        elif tag == "td" and self._in_row:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None:
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr":
            self._in_row = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: dict[str, str] = {}
        self._href: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href")

    def handle_data(self, data: str) -> None:
        if self._href is not None and data.strip():
            self.links[data.strip()] = self._href
            self._href = None


def rows(html: str, row_class: str) -> list[list[str]]:
    """The text of each cell of the `<tr class="row_class">` rows, in order."""
    parser = _Rows(row_class)
    parser.feed(html)
    return parser.rows


def links(html: str) -> dict[str, str]:
    """Each link's text -> where it goes."""
    parser = _Links()
    parser.feed(html)
    return parser.links
