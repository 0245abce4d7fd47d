"""Walking a parsed page for its links and its visible text: in C (``parsers/_walk.c``)
where it may run, else in Python, with the same results.

Owns: the Python walk (``python_hrefs``, ``remove``, ``visible_text``) and whether the C
walk may run in this process (``native``). Python builds a ``LexborNode`` and an attribute
dict for every link and removes the invisible elements before it reads the text; C reads
lexbor's nodes, the links and the text in one pass (``resolved_links_text``: on a large page
the second pass of two cost as much as the first), and changes nothing. The same module
runs a worker's memo of the links it offered (``offer``: ``parsers.offered``).

``_walk.c`` reads lexbor's structs and selectolax's ``LexborNode`` object by their layout,
which is no API. So it runs only where it was built (``pip install`` compiles it; without a
C compiler it is skipped), under a selectolax release whose layout was checked
(``CHECKED_SELECTOLAX``), with ``LexborNode`` of that layout's size, and only if it finds on
a probe page exactly what the Python walk finds there. Otherwise ``native`` is ``None``.
``CRAWL_NO_C_WALK`` set (to anything) turns it off.

Invariant: a tree walked in C is not changed while the walk's ``Anchors`` are in use (they
point into the tree).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import ModuleType

import selectolax
from selectolax.lexbor import LexborHTMLParser, LexborNode

try:
    from parsers import _walk  # type: ignore[attr-defined]  # C: parsers/_walk.c
except ImportError:  # not built: no C compiler where it was installed
    _walk = None

NO_C_WALK_ENV = "CRAWL_NO_C_WALK"
CHECKED_SELECTOLAX = frozenset({"1.0.2"})
"""selectolax releases whose lexbor structs and ``LexborNode`` are the layout ``_walk.c``
reads, and whose token structs ``_scan.c`` reads (from each release's sources:
``lexbor/source/lexbor/dom/interfaces/*.h``, ``lexbor/source/lexbor/html/token*.h``,
``selectolax/lexbor.pxd``)."""
_NODE_SIZE = 48
"""``LexborNode.__basicsize__`` in those releases: the node pointer, the parser and two ints."""
ANCHOR_TEXT_VISITS = 1 << 20
"""Nodes a page's anchor texts may visit in all (both walks): anchors nest
(``<svg><a><a>...``), so their texts can hold n x depth nodes. Past it, a link's text reads
as empty."""
ANCHOR_TEXT_BYTES = 1 << 22
"""UTF-8 bytes a page's anchor texts may hold in all (both walks): n nested anchors around
one long text hold it n times in few visits. A text longer than what is left reads as empty
(shorter ones after it are still read). A page's links hold a few KB of text."""

INVISIBLE_SELECTOR = "script, style, noscript, template"
_INVISIBLE_TAGS = frozenset({"script", "style", "noscript", "template"})
_LINK_SELECTOR = "a[href], area[href], frame[src], iframe[src]"
_LINKS_AND_INVISIBLE = f"{_LINK_SELECTOR}, {INVISIBLE_SELECTOR}"
"""One walk of the tree finds both (a walk costs the same whatever it finds)."""
_FRAME_TAGS = frozenset({"frame", "iframe"})
_HREF, _SRC, _HIDDEN = 0, 1, 2
_KINDS: dict[int, int] = {}
"""lexbor's tag id of each element the query above finds -> where its link is (``_HREF``,
``_SRC``) or ``_HIDDEN``: filled from ``node.tag`` when an id is first met. A tag id is an
int read from the node; ``node.tag`` builds a new string from the tag's name each time."""


def _kind(node: LexborNode) -> int:
    """The ``_KINDS`` entry of ``node``'s tag, added if it is new."""
    tag = node.tag
    kind = _HIDDEN if tag in _INVISIBLE_TAGS else _SRC if tag in _FRAME_TAGS else _HREF
    _KINDS[node.tag_id] = kind
    return kind


def python_hrefs(
    tree: LexborHTMLParser,
    most: int,
    invisible: list[LexborNode] | None,
    budget: int = ANCHOR_TEXT_VISITS,
    text_bytes: int = ANCHOR_TEXT_BYTES,
) -> tuple[list[str], list[tuple[int, str]], Callable[[int], str]]:
    """The first ``most`` hrefs of the tree's links (``href`` of a and area, ``src`` of frame
    and iframe), (index, rel) of those with a rel, and the text of link i's element: one
    selector pass, one attribute dict per node (each ``attributes`` call builds a new dict).
    ``invisible``: if given, the same pass appends the script, style, noscript and template
    elements to it, in document order (for ``remove``). ``budget``, ``text_bytes``: node
    visits and bytes the texts may take in all (``AnchorTexts``). ``parsers._walk.links`` in
    C."""
    nodes: list[LexborNode] = []
    hrefs: list[str] = []
    rels: list[tuple[int, str]] = []  # (index in hrefs, rel) of the links that have a rel
    kinds = _KINDS
    for node in tree.css(_LINK_SELECTOR if invisible is None else _LINKS_AND_INVISIBLE):
        kind = kinds.get(node.tag_id)
        if kind is None:
            kind = _kind(node)
        if kind == _HIDDEN:
            invisible.append(node)  # type: ignore[union-attr]  # only queried with a list
            continue
        if len(hrefs) >= most:
            continue  # the walk goes on for the invisible elements
        attributes = node.attributes
        href = attributes.get("href" if kind == _HREF else "src")
        if href:
            rel = attributes.get("rel")
            if rel:
                rels.append((len(hrefs), rel))
            nodes.append(node)
            hrefs.append(href)
    return hrefs, rels, AnchorTexts(nodes, budget, text_bytes)


class AnchorTexts:
    """``texts(i)``: the text of ``nodes[i]`` (``node.text()``: its text nodes joined), or ""
    once the visits below the nodes read so far pass ``budget``, or "" if it holds more
    UTF-8 bytes than are left of ``text_bytes``: as ``_walk.c``'s ``Anchors.text``.

    The Python walk's nodes cannot say how many nodes or bytes are below them: a node with
    nothing below it but one text node (most links) is read by ``node.text()``; any other is
    walked one node at a time, counting. Each text node is decoded once (``_texts``, by its
    address), however many nested anchors hold it."""

    __slots__ = ("_bytes", "_left", "_nodes", "_texts")

    def __init__(self, nodes: list[LexborNode], budget: int, text_bytes: int) -> None:
        self._nodes = nodes
        self._left = budget
        self._bytes = max(text_bytes, 0)
        self._texts: dict[int, tuple[str, int]] = {}

    def _text_node(self, node: LexborNode) -> tuple[str, int]:
        """(the text, its UTF-8 length) of a text node."""
        found = self._texts.get(node.mem_id)
        if found is None:
            text = node.text_content or ""
            found = self._texts[node.mem_id] = (text, len(text.encode("utf-8", "surrogatepass")))
        return found

    def __call__(self, i: int) -> str:
        node = self._nodes[i]
        child = node.child
        if child is None:
            return ""
        parts: list[tuple[str, int]] = []
        if child.next is None and child.is_text_node:
            if self._left < 1:
                self._left = 0
                return ""
            self._left -= 1
            parts.append(self._text_node(child))
        else:
            left = self._left + 1  # the walk yields the node itself first: not a visit
            for below in node.traverse(include_text=True):
                left -= 1
                if left < 0:
                    self._left = 0
                    return ""
                if below.is_text_node:
                    parts.append(self._text_node(below))
            self._left = left
        size = sum(length for _, length in parts)
        if size > self._bytes:
            return ""
        self._bytes -= size
        return "".join(text for text, _ in parts)


def remove(nodes: list[LexborNode]) -> None:
    """Remove ``nodes`` (found in document order) last to first, so that a match inside
    another (``<noscript><style>``) goes before its ancestor and nothing is touched after
    it was freed."""
    for node in reversed(nodes):
        node.decompose(recursive=False)


def strip_invisible(tree: LexborHTMLParser) -> None:
    """Remove script, style, noscript and template elements (what ``strip_tags`` does with
    one query per tag) with one query."""
    remove(tree.css(INVISIBLE_SELECTOR))


def text_root(tree: LexborHTMLParser) -> LexborNode | None:
    """The element whose text is the page's (``visible_text``): the body, or the document's
    element where there is none in the tree."""
    body = tree.body
    return body if body is not None and body.parent is not None else tree.root


def visible_text(tree: LexborHTMLParser, walk: ModuleType | None = None) -> str:
    """The text of the body (or the document), its text nodes stripped and joined by one
    space; whitespace-only nodes (the line breaks between tags) are left out instead of
    adding a space each (``skip_empty``: faster on documentation pages, and no runs of
    spaces in the stored text). Without ``walk`` (``native``), the invisible elements must
    be removed before; ``walk.text`` skips them. A body that a ``<frameset>`` took the place
    of is out of the tree (and no query reaches its invisible elements): the document's
    element is read then, as where no body was ever made."""
    root = text_root(tree)
    if root is None:
        return ""
    if walk is not None:
        return walk.text(root)  # type: ignore[no-any-return]
    return root.text(separator=" ", strip=True, skip_empty=True).strip()


Walked = tuple[list[str], list[tuple[int, str]], list[str], str]

_PROBES = (
    b"<!doctype html><title>t</title><style>s</style><a href='/a' REL='Nofollow x'>A <b>b</b>"
    b"</a><a href=''>e</a><a>n</a><area href='/r'><iframe src='/f' href='/no'></iframe>"
    b"<script src='/no'>j</script><svg><a xlink:href='/x'>x</a><a href='/s'>s<script>k"
    b"</script></a></svg><noscript>o</noscript><template><a href='/t'>t</a></template>"
    b"<p>\xc3\xa9 \xff <i> </i>\xc2\xa0<b>end</b></p><frameset><frame src='/no'></frameset>",
    b"<head><title>f</title></head><frameset><frame src='/f'><noframes>n</noframes></frameset>",
    b"<a href='/m'>m<svg><template>h</template></svg><math><template>k</template>v</math></a>",
)
"""Pages with each case the C walk must agree on, each of its tag and attribute ids met:
attribute names in capitals, empty and missing hrefs, prefixed attributes, foreign elements,
invisible ones nested in a link, template content (in HTML, where it is out of the tree, and
in foreign content, where it is not), a frameset's frames, invalid UTF-8, whitespace-only and
non-ASCII-space text."""


def walk_in_python(tree: LexborHTMLParser, most: int) -> Walked:
    """hrefs, rels, every link's text, and the visible text, as ``parsers.html`` reads them
    without the C walk (the tree is changed: its invisible elements are removed)."""
    invisible: list[LexborNode] = []
    hrefs, rels, text_of = python_hrefs(tree, most, invisible)
    texts = [text_of(i) for i in range(len(hrefs))]
    remove(invisible)
    return hrefs, rels, texts, visible_text(tree)


def walk_in_c(module: ModuleType, tree: LexborHTMLParser, most: int) -> Walked:
    """``walk_in_python`` with the C walk (the tree is not changed)."""
    root = tree.root
    if root is None:
        return [], [], [], ""
    hrefs, rels, anchors = module.links(root, most, ANCHOR_TEXT_VISITS, ANCHOR_TEXT_BYTES)
    texts = [anchors.text(i) for i in range(len(anchors))]
    return hrefs, rels, texts, visible_text(tree, module)


def _load() -> ModuleType | None:
    if _walk is None or os.environ.get(NO_C_WALK_ENV) or not hasattr(_walk, "offer"):
        return None  # not built, turned off, or built from an older source (its last function)
    if selectolax.__version__ not in CHECKED_SELECTOLAX or LexborNode.__basicsize__ != _NODE_SIZE:
        return None
    _walk.bind(LexborNode)
    for probe in _PROBES:
        if walk_in_c(_walk, LexborHTMLParser(probe), 1_000) != walk_in_python(
            LexborHTMLParser(probe), 1_000
        ) or _one_pass_text(_walk, LexborHTMLParser(probe)) != visible_text(
            LexborHTMLParser(probe), _walk
        ):
            return None
    return _walk


_PROBE_BASE = b"http://h/d/http://h/d/p"
"""A base for ``resolved_links_text`` on the probes: origin, directory and URL (see there)."""


def _one_pass_text(module: ModuleType, tree: LexborHTMLParser) -> str | None:
    """The text ``resolved_links_text`` reads with the links (``None`` for no tree)."""
    root, below = tree.root, text_root(tree)
    if root is None or below is None:
        return None
    walked = module.resolved_links_text(
        root, below, 1_000, ANCHOR_TEXT_VISITS, ANCHOR_TEXT_BYTES, _PROBE_BASE, 8, 3
    )
    return walked[4]  # type: ignore[no-any-return]


native: ModuleType | None = _load()
"""``parsers._walk`` where it may run (see the module's docstring), else ``None``."""
