"""The token blob's binary form (``parsers.terms.BLOB_HEADER``, then the ids as <u4 and the
counts in the narrowest of u1, <u2 and <u4 that holds the largest), the byte table the
tokenizer folds bytes with, and its counting table's key: numpy only, for both the numba
kernels (``parsers.tokens``) and the calls into either build of them (``parsers.native``)."""

from __future__ import annotations

import os

import numpy as np
import numpy.typing as npt

from parsers.terms import BLOB_HEADER, BLOB_MAGIC, BLOB_VERSION, FLAG_U8_COUNTS, FLAG_U16_COUNTS


def _fold_table() -> npt.NDArray[np.uint8]:
    """Byte -> lower-cased token byte, or 0 for a separator."""
    table = np.zeros(256, dtype=np.uint8)
    for c in b"0123456789abcdefghijklmnopqrstuvwxyz":
        table[c] = c
    for c in b"ABCDEFGHIJKLMNOPQRSTUVWXYZ":
        table[c] = c + 32
    table[0x80:] = np.arange(0x80, 0x100, dtype=np.uint8)
    return table


FOLD = _fold_table()
NO_QUERY = np.zeros(0, dtype=np.uint32)
TABLE_KEY = np.uint64(int.from_bytes(os.urandom(8), "little"))
"""The secret of the tokenizer's counting table (``parsers.tokens._slot``): random in each
process (the fork server's, shared by its workers), so that no page can choose words whose
slots collide. The kernels' results do not depend on it."""
COUNT_DTYPES = {FLAG_U8_COUNTS: "u1", FLAG_U16_COUNTS: "<u2", 0: "<u4"}
"""A blob's flags -> the dtype of its counts."""


def encode_blob(
    ids: npt.NDArray[np.uint32], counts: npt.NDArray[np.uint32], length: int, top: int
) -> bytes:
    """The blob of a bag of words: ``ids`` and their ``counts`` (``top`` the largest), of
    ``length`` tokens in all."""
    n = int(ids.size)
    flags = FLAG_U8_COUNTS if top <= 0xFF else FLAG_U16_COUNTS if top <= 0xFFFF else 0
    header = BLOB_HEADER.pack(BLOB_MAGIC, BLOB_VERSION, flags, n, length)
    narrow = counts.astype(COUNT_DTYPES[flags], copy=False)
    return b"".join((header, ids.astype("<u4", copy=False).tobytes(), narrow.tobytes()))
