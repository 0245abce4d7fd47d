"""Character encodings as the WHATWG Encoding Standard defines them: labels, and decoding.

Owns: the standard's table of labels (each of its 40 encodings with every label it has, from
https://encoding.spec.whatwg.org/#names-and-labels), ``get_encoding`` (a label to its
encoding) and ``decode`` (bytes in an encoding to text); what implements each encoding: a
Python codec, or a 256-entry table for the single-byte ones (Python's codec, with the few
bytes it leaves undefined or maps otherwise set as the standard's index has them), or code
here (x-user-defined, replacement).

Invariants:
- only the standard's labels name an encoding: ASCII case-insensitive, ASCII whitespace
  around them ignored; any other name is unknown (``None``), whatever codec Python has for
  it (``punycode``, ``rot13``, ``utf-7``, ``idna``, ``zlib`` ... are not encodings here);
- an encoding is named by its standard name in lower case (``"utf-8"``, ``"windows-1252"``,
  ``"shift_jis"``, ``"x-user-defined"``), the keys of ``ENCODINGS``;
- ``decode`` never raises on any bytes (malformed input becomes U+FFFD) and takes time
  linear in the input for every encoding: each is a single-pass C decoder (a charmap
  table, UTF-8/16, or one of CPython's CJK codecs) or constant work (replacement);
- pure: no IO, no state but lazily built tables; imports nothing from ``crawler`` or
  ``storage``.

Where the Python codec behind a multi-byte encoding is not byte-for-byte the standard's
decoder, it is the closest one CPython has: Big5 is ``big5hkscs``; EUC-KR ``cp949`` (the
standard's index exactly); Shift_JIS ``cp932`` (likewise for its two-byte codes); GBK and
gb18030 ``gb18030`` (the standard decodes GBK as gb18030); EUC-JP ``euc_jp``; ISO-2022-JP
``iso2022_jp_ext`` (which knows the standard's half-width katakana escape). What differs: a
few hundred HKSCS codes Python's Big5 lacks (U+FFFD here), the gb18030 code points that
GB18030-2022 moved out of the Private Use Area, a lone 0x80 in GBK (U+20AC there), and the
JIS X 0208 characters that the standard maps as Windows does (U+FF5E, not U+301C) and its NEC
and IBM extensions, in EUC-JP and ISO-2022-JP.
"""

from __future__ import annotations

import codecs
import functools
from collections.abc import Callable

__all__ = [
    "ASCII_COMPATIBLE", "ENCODINGS", "LABELS", "bom_encoding", "decode", "from_python",
    "get_encoding",
]  # fmt: skip

ENCODINGS: dict[str, tuple[str, ...]] = {
    "utf-8": ("unicode-1-1-utf-8", "unicode11utf8", "unicode20utf8", "utf-8", "utf8",
              "x-unicode20utf8"),
    "ibm866": ("866", "cp866", "csibm866", "ibm866"),
    "iso-8859-2": ("csisolatin2", "iso-8859-2", "iso-ir-101", "iso8859-2", "iso88592",
                   "iso_8859-2", "iso_8859-2:1987", "l2", "latin2"),
    "iso-8859-3": ("csisolatin3", "iso-8859-3", "iso-ir-109", "iso8859-3", "iso88593",
                   "iso_8859-3", "iso_8859-3:1988", "l3", "latin3"),
    "iso-8859-4": ("csisolatin4", "iso-8859-4", "iso-ir-110", "iso8859-4", "iso88594",
                   "iso_8859-4", "iso_8859-4:1988", "l4", "latin4"),
    "iso-8859-5": ("csisolatincyrillic", "cyrillic", "iso-8859-5", "iso-ir-144", "iso8859-5",
                   "iso88595", "iso_8859-5", "iso_8859-5:1988"),
    "iso-8859-6": ("arabic", "asmo-708", "csiso88596e", "csiso88596i", "csisolatinarabic",
                   "ecma-114", "iso-8859-6", "iso-8859-6-e", "iso-8859-6-i", "iso-ir-127",
                   "iso8859-6", "iso88596", "iso_8859-6", "iso_8859-6:1987"),
    "iso-8859-7": ("csisolatingreek", "ecma-118", "elot_928", "greek", "greek8", "iso-8859-7",
                   "iso-ir-126", "iso8859-7", "iso88597", "iso_8859-7", "iso_8859-7:1987",
                   "sun_eu_greek"),
    "iso-8859-8": ("csiso88598e", "csisolatinhebrew", "hebrew", "iso-8859-8", "iso-8859-8-e",
                   "iso-ir-138", "iso8859-8", "iso88598", "iso_8859-8", "iso_8859-8:1988",
                   "visual"),
    "iso-8859-8-i": ("csiso88598i", "iso-8859-8-i", "logical"),
    "iso-8859-10": ("csisolatin6", "iso-8859-10", "iso-ir-157", "iso8859-10", "iso885910", "l6",
                    "latin6"),
    "iso-8859-13": ("iso-8859-13", "iso8859-13", "iso885913"),
    "iso-8859-14": ("iso-8859-14", "iso8859-14", "iso885914"),
    "iso-8859-15": ("csisolatin9", "iso-8859-15", "iso8859-15", "iso885915", "iso_8859-15",
                    "l9"),
    "iso-8859-16": ("iso-8859-16",),
    "koi8-r": ("cskoi8r", "koi", "koi8", "koi8-r", "koi8_r"),
    "koi8-u": ("koi8-ru", "koi8-u"),
    "macintosh": ("csmacintosh", "mac", "macintosh", "x-mac-roman"),
    "windows-874": ("dos-874", "iso-8859-11", "iso8859-11", "iso885911", "tis-620",
                    "windows-874"),
    "windows-1250": ("cp1250", "windows-1250", "x-cp1250"),
    "windows-1251": ("cp1251", "windows-1251", "x-cp1251"),
    "windows-1252": ("ansi_x3.4-1968", "ascii", "cp1252", "cp819", "csisolatin1", "ibm819",
                     "iso-8859-1", "iso-ir-100", "iso8859-1", "iso88591", "iso_8859-1",
                     "iso_8859-1:1987", "l1", "latin1", "us-ascii", "windows-1252", "x-cp1252"),
    "windows-1253": ("cp1253", "windows-1253", "x-cp1253"),
    "windows-1254": ("cp1254", "csisolatin5", "iso-8859-9", "iso-ir-148", "iso8859-9",
                     "iso88599", "iso_8859-9", "iso_8859-9:1989", "l5", "latin5",
                     "windows-1254", "x-cp1254"),
    "windows-1255": ("cp1255", "windows-1255", "x-cp1255"),
    "windows-1256": ("cp1256", "windows-1256", "x-cp1256"),
    "windows-1257": ("cp1257", "windows-1257", "x-cp1257"),
    "windows-1258": ("cp1258", "windows-1258", "x-cp1258"),
    "x-mac-cyrillic": ("x-mac-cyrillic", "x-mac-ukrainian"),
    "gbk": ("chinese", "csgb2312", "csiso58gb231280", "gb2312", "gb_2312", "gb_2312-80", "gbk",
            "iso-ir-58", "x-gbk"),
    "gb18030": ("gb18030",),
    "big5": ("big5", "big5-hkscs", "cn-big5", "csbig5", "x-x-big5"),
    "euc-jp": ("cseucpkdfmtjapanese", "euc-jp", "x-euc-jp"),
    "iso-2022-jp": ("csiso2022jp", "iso-2022-jp"),
    "shift_jis": ("csshiftjis", "ms932", "ms_kanji", "shift-jis", "shift_jis", "sjis",
                  "windows-31j", "x-sjis"),
    "euc-kr": ("cseuckr", "csksc56011987", "euc-kr", "iso-ir-149", "korean", "ks_c_5601-1987",
               "ks_c_5601-1989", "ksc5601", "ksc_5601", "windows-949"),
    "replacement": ("csiso2022kr", "hz-gb-2312", "iso-2022-cn", "iso-2022-cn-ext",
                    "iso-2022-kr", "replacement"),
    "utf-16be": ("unicodefffe", "utf-16be"),
    "utf-16le": ("csunicode", "iso-10646-ucs-2", "ucs-2", "unicode", "unicodefeff", "utf-16",
                 "utf-16le"),
    "x-user-defined": ("x-user-defined",),
}  # fmt: skip
"""Each encoding of the standard (its name in lower case) -> its labels, in the standard's order."""

LABELS: dict[str, str] = {label: name for name, labels in ENCODINGS.items() for label in labels}
"""Each label -> the name of its encoding."""

ASCII_COMPATIBLE = frozenset(ENCODINGS) - {"utf-16be", "utf-16le", "iso-2022-jp", "replacement"}
"""The encodings that decode ASCII bytes as ASCII (an all-ASCII body is the same text in any of
them); ISO-2022-JP is 7-bit but not one (its escapes switch charsets)."""

_SINGLE_BYTE: dict[str, str] = {
    "ibm866": "cp866",
    **{f"iso-8859-{n}": f"iso8859_{n}" for n in (2, 3, 4, 5, 6, 7, 8, 10, 13, 14, 15, 16)},
    "iso-8859-8-i": "iso8859_8",  # the same bytes as ISO-8859-8 (only its direction differs)
    "koi8-r": "koi8_r",
    "koi8-u": "koi8_u",
    "macintosh": "mac_roman",
    "windows-874": "cp874",
    **{f"windows-{n}": f"cp{n}" for n in range(1250, 1259)},
    "x-mac-cyrillic": "mac_cyrillic",
}
"""Single-byte encoding -> the Python codec its table is built from (``_table``)."""

_TABLE_FIXES: dict[str, dict[int, str]] = {
    "koi8-u": {0xAE: "\u045e", 0xBE: "\u040e"},  # the standard's KOI8-U is KOI8-RU there
    "windows-1255": {0xCA: "\u05ba"},
}
"""Bytes whose character in the standard's index is not the base codec's (besides the
windows-* rule in ``_table``)."""

_MULTI_BYTE: dict[str, str] = {
    "utf-8": "utf-8",
    "utf-16be": "utf-16-be",
    "utf-16le": "utf-16-le",
    "gbk": "gb18030",
    "gb18030": "gb18030",
    "big5": "big5hkscs",
    "euc-jp": "euc_jp",
    "iso-2022-jp": "iso2022_jp_ext",
    "shift_jis": "cp932",
    "euc-kr": "cp949",
}
"""Encoding -> the Python codec that decodes it (with ``errors="replace"``)."""

_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_BE, "utf-16be"),
    (codecs.BOM_UTF16_LE, "utf-16le"),
)
_ASCII_WHITESPACE = "\t\n\f\r "
_UNDEFINED = "\ufffd"
"""What a table holds for a byte the standard's index has no character for: the U+FFFD the
error would give, without the error (whose handling is the slow path of a charmap decode)."""


def get_encoding(label: str | None) -> str | None:
    """The encoding ``label`` names (the standard's "get an encoding"), or ``None``: the label
    is compared ASCII case-insensitively, without the ASCII whitespace around it."""
    if not label:
        return None
    label = label.strip(_ASCII_WHITESPACE)
    if not label.isascii():  # str.lower would fold non-ASCII letters (U+212A KELVIN SIGN: k)
        return None
    return LABELS.get(label.lower())


def bom_encoding(data: bytes) -> str | None:
    """The encoding a byte order mark at the start of ``data`` says (UTF-8, UTF-16BE or
    UTF-16LE: the standard's "BOM sniff"), or ``None`` without one."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            return name
    return None


def decode(data: bytes, encoding: str) -> str:
    """``data`` as text in ``encoding`` (a key of ``ENCODINGS``), as the standard's "decode"
    does: a byte order mark overrides ``encoding`` and is dropped; malformed input becomes
    U+FFFD. Raises ``LookupError`` for a name that is not an encoding's (a caller's bug)."""
    bom = bom_encoding(data)
    if bom is not None:
        data, encoding = data[3:] if bom == "utf-8" else data[2:], bom
    return _decoder(encoding)(data)


def from_python(codec: str) -> str | None:
    """The encoding of the standard that a Python codec name means (what a charset detector
    such as charset-normalizer answers: ``"cp1251"``, ``"latin_1"``, ``"utf_8"``), or ``None``
    where the standard has none (``"cp437"``, ``"utf_32"``, ``"punycode"``)."""
    try:
        name = codecs.lookup(codec).name
    except (LookupError, ValueError):  # ValueError: a NUL in the name
        return None
    return _python_names().get(name)


@functools.cache
def _python_names() -> dict[str, str]:
    """Python codec name (``codecs.lookup(...).name``) -> the encoding it stands for."""
    names = {
        "latin_1": "windows-1252", "ascii": "windows-1252", "iso8859_9": "windows-1254",
        "iso8859_11": "windows-874", "tis_620": "windows-874", "utf_8_sig": "utf-8",
        "gbk": "gbk", "gb2312": "gbk", "big5": "big5", "cp950": "big5", "shift_jis": "shift_jis",
        "shift_jis_2004": "shift_jis", "shift_jisx0213": "shift_jis", "euc_kr": "euc-kr",
        "euc_jis_2004": "euc-jp", "euc_jisx0213": "euc-jp", "iso2022_jp": "iso-2022-jp",
    }  # fmt: skip
    names.update((codec, name) for name, codec in {**_SINGLE_BYTE, **_MULTI_BYTE}.items())
    names["iso8859_8"] = "iso-8859-8"  # not -8-i, which shares its codec
    return {codecs.lookup(codec).name: name for codec, name in names.items()}


@functools.cache
def _decoder(encoding: str) -> Callable[[bytes], str]:
    """What decodes bytes in ``encoding`` (built once per encoding)."""
    codec = _MULTI_BYTE.get(encoding)
    if codec is not None:
        return functools.partial(_codec_decode, codec=codec)
    if encoding in _SINGLE_BYTE or encoding == "x-user-defined":
        return functools.partial(_charmap_decode, table=_table(encoding))
    if encoding == "replacement":
        return _replacement
    raise LookupError(f"not an encoding of the Encoding Standard: {encoding!r}")


def _codec_decode(data: bytes, codec: str) -> str:
    return data.decode(codec, "replace")


def _charmap_decode(data: bytes, table: str) -> str:
    return codecs.charmap_decode(data, "replace", table)[0]


def _replacement(data: bytes) -> str:
    """The replacement encoding: any input but the empty one is one U+FFFD (what keeps
    ISO-2022-KR, HZ and the like from being read as ASCII-looking text)."""
    return "\ufffd" if data else ""


def _table(encoding: str) -> str:
    """The 256 characters the bytes of a single-byte encoding (or x-user-defined) decode to,
    U+FFFD where the standard's index has none. From the Python codec, but for: the
    bytes 0x80-0x9F that windows-* codecs leave undefined, which the standard maps to the C1
    control of the same value; ``_TABLE_FIXES``; x-user-defined, which maps 0x80-0xFF to
    U+F780-U+F7FF."""
    if encoding == "x-user-defined":
        return "".join(map(chr, range(0x80))) + "".join(map(chr, range(0xF780, 0xF800)))
    codec = _SINGLE_BYTE[encoding]
    chars = []
    for byte in range(256):
        try:
            chars.append(bytes((byte,)).decode(codec))
        except UnicodeDecodeError:
            c1 = encoding.startswith("windows-") and 0x80 <= byte < 0xA0
            chars.append(chr(byte) if c1 else _UNDEFINED)
    for byte, char in _TABLE_FIXES.get(encoding, {}).items():
        chars[byte] = char
    return "".join(chars)
