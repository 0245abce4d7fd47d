"""parsers.links: WHATWG resolution, normalisation and authority helpers (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers.links import (
    Resolver,
    normalize_url,
    resolve_url,
    url_authority,
    url_hostname,
    url_origin,
)
from parsers.native import resolve_all
from tests.traced import traced


@pytest.mark.parametrize(
    ("base", "href", "expected"),
    [
        ("http://example.com/a/b.html", "c.html", "http://example.com/a/c.html"),
        ("http://example.com/a/b.html", "../c.html", "http://example.com/c.html"),
        ("http://example.com/a/b.html", "/x/./y/../z", "http://example.com/x/z"),
        ("http://example.com/a/b.html", "#frag", "http://example.com/a/b.html"),
        ("http://example.com/a/b.html", "?q=1#f", "http://example.com/a/b.html?q=1"),
        ("http://example.com/a/", "//other.org/p", "http://other.org/p"),
        ("https://example.com/", "HTTP://EXAMPLE.COM:80/A", "http://example.com/A"),
        ("http://example.com/", "https://example.com:443/", "https://example.com/"),
        ("http://example.com/", "  /padded  ", "http://example.com/padded"),
        ("http://example.com/", "http://bücher.de/", "http://xn--bcher-kva.de/"),
        ("http://example.com/", "/a b", "http://example.com/a%20b"),
        ("http://example.com/", "/%7e%2f%41", "http://example.com/~%2FA"),
        ("http://example.com/", "/a?q=%2d%3d", "http://example.com/a?q=-%3D"),
        ("http://example.com/", "/a/%2e%2E/b", "http://example.com/b"),  # WHATWG dot segment
        ("http://example.com/", "mailto:a@b.c", None),
        ("http://example.com/", "javascript:void(0)", None),
        ("http://example.com/", "ftp://example.com/f", None),
        ("http://example.com/", "http://[::1", None),
        ("http://example.com/", "data:text/html,hi", None),
    ],
)
def test_resolve_url(base: str, href: str, expected: str | None) -> None:
    assert resolve_url(base, href) == expected


def test_normalize_rejects_non_http() -> None:
    with pytest.raises(ValueError, match="not an http"):
        normalize_url("ftp://example.com/")
    with pytest.raises(ValueError, match="invalid URL"):
        normalize_url("http://")


@given(st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x2FFF), max_size=40))
def test_normalize_is_idempotent(path: str) -> None:
    url = resolve_url("http://Example.COM:80/dir/page.html", path)
    if url is not None:
        assert normalize_url(url) == url
        assert normalize_url(normalize_url(url)) == url
        assert "#" not in url


_ORIGIN_URLS = st.lists(
    st.tuples(
        st.sampled_from(["http://", "https://"]),
        st.sampled_from(["", "u@", "u:p@", "a.b@"]),
        st.sampled_from(["a.b", "a.bc", "a.b.c", "[::1]", "1.2.3.4"]),
        st.sampled_from(["", ":1", ":12", ":8080"]),
        st.sampled_from(["/", "/x", "?q", "/a@b", "/a/b?c=/d"]),
    ).map("".join),
    max_size=30,
)


@given(_ORIGIN_URLS)
def test_url_origin_remembers_nothing_wrong(urls: list[str]) -> None:
    """The one-entry memo answers, in any order, what the parse answers: hosts that prefix
    one another, ports, userinfo, an ``@`` in the path."""
    for url in urls:
        authority = url_authority(url)
        assert url_origin(url) == url[: url.find("//") + 2] + authority, url


def test_authority_helpers() -> None:
    url = normalize_url("https://user:pw@Example.com:8443/p?q")
    assert url_authority(url) == "example.com:8443"
    assert url_hostname(url) == "example.com"
    assert url_origin(url) == "https://example.com:8443"
    assert url_hostname("http://[::1]:81/") == "[::1]"
    assert url_authority("http://example.com?x=1") == "example.com"


_RESOLVER_BASES = [
    "http://example.com/",
    "http://example.com/a/b/c.html",
    "http://example.com/a/b/?q=1&r=/x/../y",
    "https://example.com:8443/dir/",
    "http://user:pw@example.com:8080/x/y",
    "http://[::1]:8080/a/",
    "http://127.0.0.1:18089/a/b/p1.html",
    "http://10.0.0.255/x?y=1",
    "http://1.2.3/",  # an IPv4 look-alike: ada writes 1.2.0.3
    "http://01.2.3.4/",  # octal: ada writes 1.2.3.4
    "http://256.1.1.1/",  # not an address: ada refuses it
    "http://example.com/a/b/c/d/e/",
    "http://example.com/a%7eb/c",  # an escape in the base: ada does it all
    "HTTP://Example.COM:80/a/./b",  # not normalised: ada does it all
    "http://example.com//a/p.html",  # empty path segments: "../" climbs them one by one
    "http://example.com//",
    "http://example.com/a//b//c?q",
]
_HREF_PARTS = ["a", "B", "0", ".", "..", "../", "/", "//", "/.", "?", "=", "&", "-", "_", "~", "%7e", "#",
               ":", " ", "\t", "http://example.com", "https://example.com:8443", "@", "é",
               "http://other.org", "https://o-t.h3r.net", "http://x", "HTTP://Up.org",
               "http://1.2.3.4", "http://127.0.0.1:18089", "http://1.2.3.256", "http://01.2.3.4",
               "http://1.2.3", "http://0x7f.0.0.1", "http://1.2.3.4.5", "http://1.2.3.4a",
               "http://a.0x1f", "http://a.b.", "http://xn--bcher-kva.de",
               "http://xn--a.de", "http://a..b", "http://-a-.b", ":80", ":443", ":0", ":8080",
               ":99999", ":080", "#x:y", "#/../", "##", "mailto:", "javascript:", "c:", "ftp://x",
               "Http:", "http+x:", "http:", "https:", ":65535", ":65536", ":443/", "x-n--",
               "!", "$", "(", ")", "*", "+", ",", ";", "'", '"', "[", "]", "^", "`", "{", "|",
               "\\", "<", "%28", "%2C", "(x)", "?a=1,2", "?t=1:2@3", "/w/A_(b)"]  # fmt: skip


@given(
    st.sampled_from(_RESOLVER_BASES),
    st.lists(st.sampled_from(_HREF_PARTS), max_size=10).map("".join),
)
def test_resolver_fast_path_agrees_with_ada(base: str, href: str) -> None:
    assert Resolver(base).resolve(href) == resolve_url(base, href)


_HREF = st.lists(st.sampled_from(_HREF_PARTS), max_size=8).map("".join)


@given(
    st.sampled_from(_RESOLVER_BASES),
    st.lists(
        st.tuples(_HREF, st.sampled_from(["", "#", "#a", "#b c", "##", "#/../x"])), max_size=12
    ),
)
def test_resolver_remembers_nothing_wrong(base: str, links: list[tuple[str, str]]) -> None:
    """One resolver for a whole page, as ``_links`` uses it: the same documents at other
    fragments (its memo) and plain repeats must still resolve as ada does, in any order."""
    resolver = Resolver(base)
    hrefs = [href + fragment for href, fragment in links]
    for href in hrefs + hrefs[::-1] + [href for href, _ in links]:
        assert resolver.resolve(href) == resolve_url(base, href), href


@pytest.mark.parametrize(
    "href",
    ["c.html", "../c.html", "../../../../c", "./", ".", "..", "a/..", "a/./b/../c?x=./..",
     "/r/../s", "http://example.com/a/../b", "http://example.com", "x?", "x?a=b&c=d", ""],
)  # fmt: skip
def test_resolver_dot_segments(href: str) -> None:
    base = "http://example.com/a/b/c.html"
    assert Resolver(base).resolve(href) == resolve_url(base, href)


@pytest.mark.timeout(10)
@pytest.mark.parametrize("base", ["http://h//a/p.html", "http://h//", "http://h///a//b/"])
def test_a_base_with_empty_path_segments_resolves(base: str) -> None:
    """A page at ``http://h//a/p.html`` is a URL like any other (WHATWG path
    ``["", "a", "p.html"]``). Setting up its resolver once looped forever, growing a list:
    the parse worker hung, and its memory grew by gigabytes a minute."""
    resolver = Resolver(base)
    for href in ("../x", "../../x", "../../../x", "x", "/x", "./"):
        assert resolver.resolve(href) == resolve_url(base, href), href


_PAGE_HREFS = st.lists(
    st.tuples(
        st.sampled_from(["", " ", "\t", "\n "]),
        _HREF,
        st.sampled_from(["", "#", "#a", "#b c", "#/../x", "#\u00e9"]),
        st.sampled_from(["", " ", "\n"]),
    ).map("".join),
    max_size=20,
)


@settings(deadline=None)  # the first example loads (or compiles) the numba kernel
@given(st.sampled_from(_RESOLVER_BASES), _PAGE_HREFS)
def test_resolve_all_agrees_with_ada(base: str, hrefs: list[str]) -> None:
    """The batch kernel gives, href for href, what ada gives for the stripped href (as
    ``_links`` used to ask ``Resolver.resolve``), whatever the page holds: spaces, newlines,
    fragments, non-ASCII characters, other schemes and hosts, dot segments."""
    assert resolve_all(Resolver(base), hrefs) == [resolve_url(base, h.strip()) for h in hrefs]


RESOLVE_FORMS = [
    ("../../docs/p1.html#s2", "http://example.com/docs/p1.html"),
    ("./deep/p2.html", "http://example.com/a/b/deep/p2.html"),
    ("/sub/../p3.html?ref=nav", "http://example.com/p3.html?ref=nav"),
    ("http://example.com/x/./y/..", "http://example.com/x/"),
    ("#top", "http://example.com/a/b/c.html"),
    ("p4.html", "http://example.com/a/b/p4.html"),
    ("../../../../..", "http://example.com/"),
    ("/a//b/../c", "http://example.com/a//c"),
    (".hidden/x", "http://example.com/a/b/.hidden/x"),
    ("mailto:a@b.c", None),
    ("//other.org/p", "http://other.org/p"),
    ("?q=1", "http://example.com/a/b/c.html?q=1"),
    (" /padded ", "http://example.com/padded"),
    ("", "http://example.com/a/b/c.html"),
    ("https://other.org:443/x/../y?z=1#f", "https://other.org/y?z=1"),
    ("http://cdn.other.org:8080", "http://cdn.other.org:8080/"),
    ("HTTP://Other.org/", "http://other.org/"),
    ("http:x", "http://example.com/a/b/x"),
    ("javascript:void(0)", None),
]
"""(href, its URL against ``http://example.com/a/b/c.html``): the fast paths' forms."""


@pytest.mark.parametrize(("href", "expected"), RESOLVE_FORMS)
def test_resolve_all_forms(href: str, expected: str | None) -> None:
    base = "http://example.com/a/b/c.html"
    # the same href among others, first and last, so that its place in the batch matters not
    assert resolve_all(Resolver(base), [href]) == [expected]
    assert resolve_all(Resolver(base), ["x", href, "/y"])[1] == expected
    assert resolve_all(Resolver(base), ["x", "/y", href])[2] == expected


def test_resolve_all_newline_inside_an_href() -> None:
    base = "http://example.com/a/"
    hrefs = ["b\nc", "/d", "e"]  # ada removes the newline: the kernel must not split there
    assert resolve_all(Resolver(base), hrefs) == [
        "http://example.com/a/bc",
        "http://example.com/d",
        "http://example.com/a/e",
    ]


def test_a_deep_base_costs_memory_in_proportion() -> None:
    """A page's ``<base href>`` can have 100,000 segments (200 KB): the resolver held each
    ancestor directory as a string of its own, ~10 GB of them; now it holds their ends."""
    base = "http://h/" + "a/" * 100_000
    with traced() as memory:
        resolver = Resolver(base)
    assert memory.current < 100 * len(base)  # linear (ints); the strings were quadratic
    for href in ("../x", "../../../x", "../" * 100_001 + "x", "x"):
        assert resolver.resolve(href) == resolve_url(base, href)
