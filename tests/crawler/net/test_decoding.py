"""crawler.net.decoding: Content-Encoding chains, caps on decoded size, truncation (pure)."""

from __future__ import annotations

import gzip
import random
import zlib

import brotli
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.net.decoding import BadEncoding, BodyDecoder, BodyTooLarge, accept_encoding, codings
from tests.traced import traced

BODY = b"<html><title>x</title>" + b"hello world " * 5000


def decode(data: bytes, encoding: str, cap: int = 10**7, chunk: int = 1000) -> bytes:
    decoder = BodyDecoder(encoding, cap)
    out = b"".join(decoder.feed(data[i : i + chunk]) for i in range(0, len(data), chunk))
    return out + decoder.finish()


def raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(wbits=-15)
    return c.compress(data) + c.flush()


@pytest.mark.parametrize(
    ("encoding", "encode"),
    [
        ("gzip", gzip.compress),
        ("x-gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", raw_deflate),
        ("br", brotli.compress),
        ("zstd", zstandard.ZstdCompressor().compress),
        ("gzip, gzip", lambda b: gzip.compress(gzip.compress(b))),
        ("gzip, br", lambda b: brotli.compress(gzip.compress(b))),
        ("identity", lambda b: b),
        ("", lambda b: b),
    ],
)
def test_round_trip(encoding: str, encode) -> None:  # type: ignore[no-untyped-def]
    assert decode(encode(BODY), encoding) == BODY
    assert decode(encode(BODY), encoding, chunk=7) == BODY


@pytest.mark.parametrize(
    ("encoding", "encode"),
    [("gzip", gzip.compress), ("deflate", zlib.compress), ("br", brotli.compress),
     ("zstd", zstandard.ZstdCompressor().compress)],
)  # fmt: skip
def test_a_body_of_many_decoding_steps_round_trips(encoding: str, encode) -> None:  # type: ignore[no-untyped-def]
    """A body decoding to many times a step's 64 KiB, from an input of any piece size:
    all of it (brotli's decoder held back output that one drain did not take, and a br
    page over ~100 KB failed as truncated)."""
    words = random.Random(1)
    body = b"<p>" + b"".join(b"word%d " % words.randrange(10**6) for _ in range(100_000))
    packed = encode(body)
    for chunk in (len(packed), 65536, 1000):
        assert decode(packed, encoding, chunk=chunk) == body


def test_concatenated_gzip_members() -> None:
    assert decode(gzip.compress(b"one ") + gzip.compress(b"two"), "gzip") == b"one two"


@pytest.mark.parametrize(
    ("encoding", "encode"),
    [
        ("gzip", gzip.compress),
        ("br", brotli.compress),
        ("zstd", zstandard.ZstdCompressor().compress),
        ("gzip, gzip", lambda b: gzip.compress(gzip.compress(b))),
    ],
)
def test_bomb_is_capped_with_flat_memory(encoding: str, encode) -> None:  # type: ignore[no-untyped-def]
    bomb = encode(b"\0" * 200_000_000)  # 200 MB of zeros, a few hundred KB compressed
    with traced() as memory, pytest.raises(BodyTooLarge):
        decode(bomb, encoding, cap=1_000_000, chunk=65536)
    assert memory.peak < 8_000_000


@pytest.mark.parametrize(
    ("encoding", "data", "message"),
    [
        ("gzip", gzip.compress(BODY)[:-20], "truncated"),
        ("br", brotli.compress(BODY)[:-5], "truncated"),
        ("zstd", zstandard.ZstdCompressor().compress(BODY)[:-5], "truncated"),
        ("gzip", b"not gzip at all", "corrupt gzip"),
        ("compress", b"x", "unsupported Content-Encoding 'compress'"),
    ],
)
def test_bad_streams(encoding: str, data: bytes, message: str) -> None:
    with pytest.raises(BadEncoding, match=message):
        decode(data, encoding)


def test_header_helpers() -> None:
    assert codings("gzip, Identity, BR") == ["gzip", "br"]
    assert accept_encoding() == "gzip, deflate, br, zstd"


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.binary(max_size=9000), min_size=1, max_size=30),
    st.lists(st.integers(1, 20_000), max_size=8),
)
def test_gzip_members_decode_across_any_split_of_the_body(
    parts: list[bytes], cuts: list[int]
) -> None:
    """Members (empty ones too) end anywhere in the pieces zlib is given, and anywhere in
    what the network delivered: the body is every member's content, in order."""
    body = b"".join(gzip.compress(part, mtime=0) for part in parts)
    decoder = BodyDecoder("gzip", 1 << 30)
    out, at = [], 0
    for cut in sorted(cuts):
        out.append(decoder.feed(body[at:cut]))
        at = max(at, cut)
    out.append(decoder.feed(body[at:]))
    out.append(decoder.finish())
    assert b"".join(out) == b"".join(parts)


CUT_CODINGS = [
    ("gzip", gzip.compress),
    ("deflate", zlib.compress),
    ("br", brotli.compress),
    ("zstd", zstandard.ZstdCompressor().compress),
]


def cut_decode(data: bytes, encoding: str, cap: int, truncated: bool, chunk: int = 1000) -> bytes:
    decoder = BodyDecoder(encoding, cap, cut=True)
    out = b"".join(decoder.feed(data[i : i + chunk]) for i in range(0, len(data), chunk))
    return out + decoder.finish(truncated=truncated)


@pytest.mark.parametrize(("encoding", "encode"), CUT_CODINGS)
def test_a_cut_decoder_keeps_the_first_cap_bytes(encoding: str, encode) -> None:  # type: ignore[no-untyped-def]
    """``cut``: a body decoding to more than the cap is its first ``cap`` bytes, exactly,
    not an error; of a stream cut as it came (``truncated``), what it holds; of a bomb,
    the cap's worth, in flat memory."""
    packed = encode(BODY)
    assert cut_decode(packed, encoding, 1000, truncated=False) == BODY[:1000]
    assert cut_decode(packed, encoding, 1000, truncated=False, chunk=7) == BODY[:1000]
    assert cut_decode(packed, encoding, 10**7, truncated=False) == BODY
    prefix = cut_decode(packed[: len(packed) // 2], encoding, 10**7, truncated=True)
    assert BODY.startswith(prefix)
    with pytest.raises(BadEncoding, match="truncated"):  # not cut as it came: broken
        cut_decode(packed[: len(packed) // 2], encoding, 10**7, truncated=False)
    bomb = encode(b"\0" * 100_000_000)
    with traced() as memory:
        assert cut_decode(bomb, encoding, 1_000_000, truncated=False, chunk=65536) == bytes(
            1_000_000
        )
    assert memory.peak < 8_000_000


def test_a_cut_decoder_does_not_cut_inside_stacked_codings() -> None:
    """Stacked codings whose middle stage overflows fail, cut or not: the cap's worth of
    a middle stage is no prefix of the body."""
    noise = random.Random(0).randbytes(300_000)  # its gzip, the middle stage, is as long
    with pytest.raises(BodyTooLarge):
        cut_decode(gzip.compress(gzip.compress(noise)), "gzip, gzip", 100_000, truncated=False)
