"""parsers.encodings: the Encoding Standard's labels, and decoding in each of its encodings."""

from __future__ import annotations

import codecs
import functools
import hashlib
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from parsers import encodings
from parsers.encodings import (
    ASCII_COMPATIBLE,
    ENCODINGS,
    LABELS,
    bom_encoding,
    decode,
    from_python,
    get_encoding,
)


def test_the_table_has_the_standards_40_encodings_and_228_labels() -> None:
    assert len(ENCODINGS) == 40
    assert sum(map(len, ENCODINGS.values())) == len(LABELS) == 228  # no label twice
    for name, labels in ENCODINGS.items():
        assert name == name.lower() and name in LABELS.values()
        for label in labels:
            assert label.isascii() and label == label.lower() == label.strip()
            assert LABELS[label] == name


@pytest.mark.parametrize(
    ("label", "encoding"),
    [
        ("utf-8", "utf-8"), ("UTF8", "utf-8"), ("unicode-1-1-utf-8", "utf-8"),
        ("latin1", "windows-1252"), ("ISO-8859-1", "windows-1252"), ("ascii", "windows-1252"),
        ("US-ASCII", "windows-1252"), ("ansi_x3.4-1968", "windows-1252"), ("cp819", "windows-1252"),
        ("iso-8859-9", "windows-1254"), ("tis-620", "windows-874"), ("iso-8859-11", "windows-874"),
        ("big5", "big5"), ("Big5-HKSCS", "big5"), ("Shift_JIS", "shift_jis"), ("sjis", "shift_jis"),
        ("windows-31j", "shift_jis"), ("euc-kr", "euc-kr"), ("ks_c_5601-1987", "euc-kr"),
        ("windows-949", "euc-kr"), ("gb2312", "gbk"), ("GBK", "gbk"), ("gb18030", "gb18030"),
        ("x-mac-ukrainian", "x-mac-cyrillic"), ("mac", "macintosh"), ("koi8-ru", "koi8-u"),
        ("koi8_r", "koi8-r"), ("utf-16", "utf-16le"), ("unicodefffe", "utf-16be"),
        ("ucs-2", "utf-16le"), ("iso-2022-kr", "replacement"), ("hz-gb-2312", "replacement"),
        ("csiso2022kr", "replacement"), ("iso-2022-cn-ext", "replacement"),
        ("x-user-defined", "x-user-defined"), ("logical", "iso-8859-8-i"), ("visual", "iso-8859-8"),
        ("iso-2022-jp", "iso-2022-jp"), ("x-euc-jp", "euc-jp"), ("866", "ibm866"),
        ("\t\n\f\r utf-8 \r\n", "utf-8"),
    ],
)  # fmt: skip
def test_labels(label: str, encoding: str) -> None:
    assert get_encoding(label) == encoding


@pytest.mark.parametrize(
    "name",
    [
        None, "", " ", "punycode", "rot13", "rot_13", "utf-7", "utf7", "idna", "zlib", "zlib_codec",
        "raw_unicode_escape", "unicode_escape", "base64", "hex", "uu", "bz2", "quopri", "mbcs",
        "undefined", "latin-1", "latin_1", "utf-32", "utf_8", "cp437", "iso2022_kr", "hz",
        "\u212aoi8-r",  # KELVIN SIGN, which str.lower() folds to k
        "\u0130so-8859-2", "utf-8\x00", "\x0butf-8", "\xa0utf-8", "utf-8;", "'utf-8'",
    ],
)  # fmt: skip
def test_what_is_no_label(name: str | None) -> None:
    """Python codecs (whatever they are: quadratic, transforms, 7-bit tricks) and near misses
    name no encoding: only ASCII whitespace is trimmed, only ASCII letters are folded."""
    assert get_encoding(name) is None


def _single_byte_tables() -> str:
    digest = hashlib.sha256()
    for name in sorted(encodings._SINGLE_BYTE):
        digest.update(name.encode() + b"\0" + encodings._table(name).encode("utf-8"))
    return digest.hexdigest()


def test_single_byte_tables_are_the_standards_indexes() -> None:
    """The 28 single-byte tables, digested: the digest of the standard's own indexes
    (``indexes.json`` of whatwg/encoding at a985b62, U+FFFD for a byte without a character,
    ISO-8859-8-I with ISO-8859-8's), which they were checked equal to entry by entry. A
    Python whose codecs change fails here. The bytes where the tables differ from CPython's
    codecs, by hand:"""
    assert _single_byte_tables() == (
        "236b5481cb779d43f7a6fa0ccfbc6ab6004876949df4e2f3be07f84aa439119f"
    )
    assert decode(b"\x80\x81\x8d\x9d\x9f\xe9", "windows-1252") == "€\x81\x8d\x9d\u0178é"
    assert decode(b"\x81\x98", "windows-1251") == "Ѓ\x98"
    assert decode(b"\xca", "windows-1255") == "\u05ba"
    assert decode(b"\xae\xbe\xa4", "koi8-u") == "ўЎє"
    assert decode(b"\xaa\xd2\xff", "windows-1253") == "\ufffd" * 3  # none in the index either
    assert decode(b"\xa1\xdb\xfc", "windows-874") == "ก\ufffd\ufffd"
    assert decode(b"\xdb\xf0", "macintosh") == "€\uf8ff"
    assert decode(b"\xa2\xb6\xff", "x-mac-cyrillic") == "Ґґ€"


def test_x_user_defined_and_replacement() -> None:
    assert decode(bytes(range(256)), "x-user-defined") == "".join(
        chr(b if b < 0x80 else 0xF780 + b - 0x80) for b in range(256)
    )
    assert decode(b"", "replacement") == ""
    assert decode(b"\x1b$)C\x0e!!", "replacement") == decode(b"a", "replacement") == "\ufffd"


@pytest.mark.parametrize(
    ("encoding", "data", "text"),
    [
        ("utf-8", "café €".encode(), "café €"),
        ("utf-8", b"a\xff\xc3b\xf0\x9f\x98", "a\ufffd\ufffdb\ufffd"),
        ("utf-16le", "é€".encode("utf-16-le") + b"\x00", "é€\ufffd"),
        ("utf-16be", "é€".encode("utf-16-be") + b"\xd8\x00", "é€\ufffd"),
        ("shift_jis", "日本語\uff5e".encode("cp932"), "日本語\uff5e"),  # FULLWIDTH TILDE
        ("shift_jis", b"\x87\x40", "①"),  # NEC row 13, in the standard's index
        ("euc-jp", "日本語".encode("euc_jp"), "日本語"),
        ("euc-jp", b"\x8e\xb1", "ｱ"),
        ("iso-2022-jp", b"\x1b$B0!\x1b(Bx\x1b(I12\x1b(B", "亜xｱｲ"),
        ("euc-kr", "똠방각하".encode("cp949"), "똠방각하"),
        ("big5", "中文".encode("big5"), "中文"),
        ("big5", b"\x88\x62", "\u00ca\u0304"),  # one of HKSCS's pairs
        ("gbk", "中文".encode("gbk"), "中文"),
        ("gbk", b"\x95\x32\x82\x36", "\U00020000"),  # the standard decodes GBK as gb18030
        ("gb18030", "中文\U00020000".encode("gb18030"), "中文\U00020000"),
        ("iso-8859-8-i", "שלום".encode("iso8859_8"), "שלום"),
    ],
)  # fmt: skip
def test_decode(encoding: str, data: bytes, text: str) -> None:
    assert decode(data, encoding) == text


def test_a_bom_overrides_the_encoding_and_is_dropped() -> None:
    assert bom_encoding(b"\xef\xbb\xbfx") == "utf-8"
    assert bom_encoding(b"\xfe\xffx") == "utf-16be"
    assert bom_encoding(b"\xff\xfex") == "utf-16le"
    assert bom_encoding(b"\xef\xbbx") is bom_encoding(b"") is None
    assert decode(codecs.BOM_UTF8 + "é".encode(), "windows-1252") == "é"
    assert decode(codecs.BOM_UTF16_BE + "é".encode("utf-16-be"), "utf-8") == "é"
    assert decode(codecs.BOM_UTF16_LE + "é".encode("utf-16-le"), "shift_jis") == "é"
    assert decode(codecs.BOM_UTF8, "replacement") == ""


def test_an_unknown_name_is_a_callers_bug() -> None:
    for name in ("punycode", "cp1252", "UTF-8", "latin1"):  # a label is not an encoding's name
        with pytest.raises(LookupError):
            decode(b"x", name)


@pytest.mark.parametrize("encoding", sorted(ASCII_COMPATIBLE))
def test_ascii_compatible_encodings_decode_ascii_as_ascii(encoding: str) -> None:
    ascii_bytes = bytes(range(128))
    assert decode(ascii_bytes, encoding) == ascii_bytes.decode("ascii")


def test_the_others_do_not() -> None:
    assert set(ENCODINGS) - ASCII_COMPATIBLE == {
        "utf-16be",
        "utf-16le",
        "iso-2022-jp",
        "replacement",
    }
    assert decode(b"\x1b$B0!", "iso-2022-jp") != "\x1b$B0!"


@functools.cache
def _hostile(size: int) -> dict[str, bytes]:
    """Inputs that make decoders work hardest: errors at every byte, unfinished sequences,
    escapes that switch state, lone surrogates."""
    rng = random.Random(size)
    return {
        "random": rng.randbytes(size),
        "high": bytes(rng.randrange(0x80, 0x100) for _ in range(size)),
        "leads": b"\x81" * size,
        "euc-jp 3-byte leads": b"\x8f" * size,
        "escapes": (b"\x1b$B\x1b(I\x1b(J\x1b" * size)[:size],
        "lone surrogates": (b"\x00\xd8" * size)[:size],
        "lone surrogates, big-endian": (b"\xd8\x00" * size)[:size],
        "lead then ASCII": (b"\x81<" * size)[:size],
        "truncated utf-8": (b"\xf0\x9f\x98" * size)[:size],
    }


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_every_encoding_decodes_hostile_bytes_in_one_pass(encoding: str) -> None:
    """What ``decode`` runs for an encoding is one of a closed set, each a single pass of a C
    decoder (so linear: see the module's invariants); on hostile input it never raises and
    gives at most a character a byte."""
    decoder = encodings._decoder(encoding)
    if decoder is not encodings._replacement:
        assert isinstance(decoder, functools.partial)
        kind = decoder.keywords
        if "table" in kind:
            assert decoder.func is encodings._charmap_decode and len(kind["table"]) == 256
        else:
            assert decoder.func is encodings._codec_decode
            assert kind["codec"] in {"utf-8", "utf-16-be", "utf-16-le", "gb18030", "big5hkscs",
                                     "euc_jp", "iso2022_jp_ext", "cp932", "cp949"}  # fmt: skip
    for data in _hostile(1 << 18).values():
        text = decode(data, encoding)
        assert len(text) <= len(data)
        if encoding in encodings._SINGLE_BYTE or encoding == "x-user-defined":
            assert len(text) == len(data)


@given(st.binary(max_size=300), st.sampled_from(sorted(ENCODINGS)))
def test_decode_never_raises(data: bytes, encoding: str) -> None:
    assert isinstance(decode(data, encoding), str)


@pytest.mark.parametrize(
    ("codec", "encoding"),
    [
        ("cp1251", "windows-1251"), ("latin_1", "windows-1252"), ("ascii", "windows-1252"),
        ("utf_8", "utf-8"), ("UTF-8", "utf-8"), ("iso8859_9", "windows-1254"),
        ("iso8859_8", "iso-8859-8"), ("cp932", "shift_jis"), ("shift_jis", "shift_jis"),
        ("euc_kr", "euc-kr"), ("gb2312", "gbk"), ("big5", "big5"), ("mac_cyrillic", "x-mac-cyrillic"),
        ("koi8_u", "koi8-u"), ("utf_16_be", "utf-16be"),
        ("cp437", None), ("utf_32", None), ("utf_7", None), ("punycode", None), ("hz", None),
        ("no such codec", None), ("utf_8\x00", None),
    ],
)  # fmt: skip
def test_from_python(codec: str, encoding: str | None) -> None:
    assert from_python(codec) == encoding
