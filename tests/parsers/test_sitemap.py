"""parsers.sitemap: urlset, sitemapindex, text, gzip, caps, hostile and broken input."""

from __future__ import annotations

import gzip
import time
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from parsers.sitemap import MAX_LOC_CHARS, MAX_SITEMAP_DEPTH, Sitemap, parse_sitemap
from tests.traced import traced

NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


def urlset(*locs: str, ns: str = NS) -> bytes:
    entries = "".join(f"<url><loc>{loc}</loc><lastmod>2024-01-01</lastmod></url>" for loc in locs)
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="{ns}">{entries}</urlset>'.encode()
    )


def test_urlset() -> None:
    body = urlset("https://example.com/", "https://example.com/a?x=1&amp;y=2")
    assert parse_sitemap(body) == Sitemap(
        urls=("https://example.com/", "https://example.com/a?x=1&y=2")
    )


def test_sitemap_index() -> None:
    body = f"""<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex xmlns="{NS}">
  <sitemap><loc>https://example.com/sitemap1.xml.gz</loc><lastmod>2024-01-01</lastmod></sitemap>
  <sitemap>
     <loc>
        https://example.com/sitemap2.xml
     </loc>
  </sitemap>
</sitemapindex>""".encode()
    result = parse_sitemap(body)
    assert result.urls == ()
    assert result.sitemaps == (
        "https://example.com/sitemap1.xml.gz",
        "https://example.com/sitemap2.xml",
    )
    assert result.error is None and not result.truncated


@pytest.mark.parametrize(
    "ns", [NS, "", "http://www.google.com/schemas/sitemap/0.84", "https://www.sitemaps.org/x"]
)
def test_any_namespace(ns: str) -> None:
    body = urlset("https://example.com/a", ns=ns) if ns else urlset("https://example.com/a")
    if not ns:
        body = body.replace(b' xmlns=""', b"")
    assert parse_sitemap(body).urls == ("https://example.com/a",)


def test_prefixed_namespace_and_whitespace_and_cdata() -> None:
    body = f"""<sm:urlset xmlns:sm="{NS}">
      <sm:url><sm:loc>\n\t https://example.com/a \r\n</sm:loc></sm:url>
      <sm:url><sm:loc><![CDATA[https://example.com/b?q=<x>]]></sm:loc></sm:url>
    </sm:urlset>""".encode()
    assert parse_sitemap(body).urls == ("https://example.com/a", "https://example.com/b?q=<x>")


def test_extension_locs_are_not_pages() -> None:
    body = f"""<urlset xmlns="{NS}" xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"
        xmlns:video="http://www.google.com/schemas/sitemap-video/1.1">
      <url>
        <loc>https://example.com/page</loc>
        <image:image><image:loc>https://cdn.example.com/i.png</image:loc></image:image>
        <image:loc>https://cdn.example.com/misplaced.png</image:loc>
        <video:video><video:content_loc>https://cdn.example.com/v.mp4</video:content_loc>
        </video:video>
      </url>
    </urlset>""".encode()
    assert parse_sitemap(body).urls == ("https://example.com/page",)


def test_only_absolute_http_urls() -> None:
    body = urlset(
        "https://example.com/ok",
        "HTTP://EXAMPLE.COM/upper",
        "/relative",
        "ftp://example.com/x",
        "javascript:alert(1)",
        "https://example.com/has space",
        "",
        "https://example.com/" + "x" * MAX_LOC_CHARS,
    )
    assert parse_sitemap(body).urls == ("https://example.com/ok", "HTTP://EXAMPLE.COM/upper")


def test_text_sitemap() -> None:
    body = (
        b"\xef\xbb\xbfhttps://example.com/a\r\n\n  https://example.com/b  \n"
        b"not a url\nhttp://example.com/c"
    )
    assert parse_sitemap(body) == Sitemap(
        urls=("https://example.com/a", "https://example.com/b", "http://example.com/c")
    )


def test_text_sitemap_over_long_line_is_skipped_across_chunks() -> None:
    body = b"https://example.com/" + b"x" * 200_000 + b"https://tail/\nhttps://example.com/ok\n"
    assert parse_sitemap(body).urls == ("https://example.com/ok",)


def test_gzip() -> None:
    body = gzip.compress(urlset("https://example.com/a"))
    assert parse_sitemap(body).urls == ("https://example.com/a",)
    text = gzip.compress(b"https://example.com/t\n")
    assert parse_sitemap(text).urls == ("https://example.com/t",)


def test_multi_member_gzip() -> None:
    body = gzip.compress(b"https://example.com/1\n") + gzip.compress(b"https://example.com/2\n")
    assert parse_sitemap(body).urls == ("https://example.com/1", "https://example.com/2")


def test_truncated_gzip_keeps_what_was_inflated() -> None:
    locs = [f"https://example.com/{i}" for i in range(2000)]
    body = gzip.compress(urlset(*locs))
    result = parse_sitemap(body[: len(body) // 2])
    assert 0 < len(result.urls) < 2000
    assert result.urls == tuple(locs[: len(result.urls)])
    assert result.error is not None


def test_corrupt_gzip_never_raises() -> None:
    body = bytearray(gzip.compress(urlset(*[f"https://e.com/{i}" for i in range(500)])))
    body[200:260] = b"\xff" * 60
    result = parse_sitemap(bytes(body))
    assert result.error is not None
    assert all(url.startswith("https://e.com/") for url in result.urls)


@pytest.fixture(scope="module")
def gzip_bomb() -> bytes:
    """64 MiB of XML whitespace inside a ~64 KiB gzip file (a 1000:1 bomb)."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [deflate.compress(urlset("https://example.com/first")[: -len(b"</urlset>")])]
    block = b" " * (1 << 20)
    parts += [deflate.compress(block) for _ in range(64)]
    parts.append(deflate.compress(b"</urlset>") + deflate.flush())
    return b"".join(parts)


def test_gzip_bomb_is_capped_and_flat_in_memory(gzip_bomb: bytes) -> None:
    assert len(gzip_bomb) < 100_000
    started = time.perf_counter()
    with traced() as memory:
        result = parse_sitemap(gzip_bomb, max_bytes=4 << 20)
    peak_bytes = memory.peak
    elapsed_s = time.perf_counter() - started  # ~0.05 s here; not asserted
    assert result.urls == ("https://example.com/first",)
    assert result.truncated and result.error is None
    assert peak_bytes < 2 << 20, f"peak {peak_bytes} bytes in {elapsed_s:.2f} s"


def test_deep_nesting_stops_parsing_and_stays_flat_in_memory() -> None:
    """10 MiB of start tags (3.5 million open elements): parsing stops at the depth cap with
    ``error`` set, keeping the URLs read before, and expat's stack of open elements (which
    tracemalloc sees: pyexpat allocates through Python's allocator) stays small."""
    body = urlset("https://example.com/a", "https://example.com/b")[: -len(b"</urlset>")]
    body += b"<a>" * (10 * 1024 * 1024 // 3)
    with traced() as memory:
        result = parse_sitemap(body)
    peak_bytes = memory.peak
    assert result.urls == ("https://example.com/a", "https://example.com/b")
    assert result.error == f"elements nested deeper than {MAX_SITEMAP_DEPTH}"
    assert not result.truncated
    assert peak_bytes < 1 << 20, peak_bytes


def test_the_depth_cap() -> None:
    def nested(depth: int) -> bytes:  # a <loc> ``depth`` deep
        wrap = depth - 2
        return ("<x>" * wrap + "<url><loc>https://e.com/deep</loc></url>" + "</x>" * wrap).encode()

    assert parse_sitemap(nested(MAX_SITEMAP_DEPTH)) == Sitemap(urls=("https://e.com/deep",))
    deeper = parse_sitemap(nested(MAX_SITEMAP_DEPTH + 1))
    assert deeper.urls == () and deeper.error == f"elements nested deeper than {MAX_SITEMAP_DEPTH}"
    gzipped = parse_sitemap(gzip.compress(b"<a>" * 100_000))
    assert gzipped.error is not None and "nested" in gzipped.error


def test_caps() -> None:
    locs = [f"https://example.com/{i}" for i in range(10)]
    capped = parse_sitemap(urlset(*locs), max_urls=3)
    assert capped.urls == tuple(locs[:3]) and capped.truncated
    assert parse_sitemap(urlset(*locs), max_urls=10) == Sitemap(urls=tuple(locs))
    body = urlset(*locs)
    cut = parse_sitemap(body, max_bytes=body.index(b"/5</loc>"))
    assert cut.urls == tuple(locs[:5]) and cut.truncated and cut.error is None
    text = "\n".join(locs).encode()
    assert parse_sitemap(text, max_bytes=len(text) - 1).urls == tuple(locs[:9])
    assert parse_sitemap(text, max_urls=0) == Sitemap(truncated=True)


def test_malformed_xml_keeps_what_came_before() -> None:
    body = urlset("https://example.com/a", "https://example.com/b").replace(
        b"</urlset>", b"<url><loc>https://example.com/c</lo"
    )
    result = parse_sitemap(body + b"<<broken></url>")
    assert result.urls == ("https://example.com/a", "https://example.com/b")
    assert result.error is not None and result.error.startswith("malformed XML")


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"   \n ",
        b"<",
        b"<html><body><a href='https://example.com/'>x</a></body></html>",
        b"<urlset><url><loc>https://example.com/&undefined;</loc></url></urlset>",
        b"\x00\x01\x02binary",
        b"\x1f\x8b",
        b"\x1f\x8bnot really gzip",
    ],
)
def test_junk_never_raises(body: bytes) -> None:
    result = parse_sitemap(body)
    assert result.urls == () and result.sitemaps == ()


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<urlset><url><loc>https://example.com/&lol9;</loc></url></urlset>"""

EXTERNAL_ENTITY = b"""<?xml version="1.0"?>
<!DOCTYPE urlset [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<urlset><url><loc>https://example.com/&xxe;</loc></url></urlset>"""

QUADRATIC = (
    b'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY a "' + b"x" * 50_000 + b'">]>'
    b"<urlset><url><loc>https://example.com/" + b"&a;" * 50_000 + b"</loc></url></urlset>"
)


@pytest.mark.parametrize("body", [BILLION_LAUGHS, EXTERNAL_ENTITY, QUADRATIC])
def test_doctype_and_entities_are_refused(body: bytes) -> None:
    result = parse_sitemap(body)
    assert result.urls == ()
    assert result.error is not None and "DOCTYPE" in result.error


def test_doctype_after_urls_cannot_happen_but_is_refused_anyway() -> None:
    body = b'<!DOCTYPE urlset SYSTEM "http://example.com/x.dtd">' + urlset("https://e.com/")
    assert parse_sitemap(body).urls == ()


@given(st.binary(max_size=2000))
def test_arbitrary_bytes_never_raise(body: bytes) -> None:
    result = parse_sitemap(body, max_bytes=1000, max_urls=5)
    assert len(result.urls) + len(result.sitemaps) <= 5
    if not body.startswith(b"\x1f\x8b"):  # one layer of gzip is taken off, not two
        assert parse_sitemap(gzip.compress(body), max_bytes=1000, max_urls=5) == result


_LOCS = st.lists(
    st.tuples(
        st.sampled_from(["http", "https"]),
        st.text("abcxyz", min_size=1, max_size=10),
        st.text("abc019/", max_size=20),
    ).map(lambda parts: f"{parts[0]}://{parts[1]}.com/{parts[2]}"),
    max_size=30,
)


@given(_LOCS)
def test_xml_and_text_agree(locs: list[str]) -> None:
    text = "\n".join(locs).encode()
    assert parse_sitemap(urlset(*locs)).urls == tuple(locs) == parse_sitemap(text).urls


@pytest.mark.parametrize("encoding", ["utf-8", "iso-8859-1", "windows-1252"])
def test_declared_encodings(encoding: str) -> None:
    body = (
        f'<?xml version="1.0" encoding="{encoding}"?>'
        "<urlset><url><loc>https://example.com/café</loc></url></urlset>"
    ).encode(encoding)
    assert parse_sitemap(body).urls == ("https://example.com/café",)


def test_a_text_sitemap_with_cr_line_ends_is_read() -> None:
    """Old Mac line ends (CR alone), as CRLF and LF are: one URL a line."""
    found = parse_sitemap(b"http://a.test/1\rhttp://a.test/2\r\nhttp://a.test/3\n", 10**6, 100)
    assert found.urls == ("http://a.test/1", "http://a.test/2", "http://a.test/3")
