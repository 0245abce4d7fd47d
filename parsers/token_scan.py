"""Finding query terms in many token blobs at once with numpy alone: no numba, nothing to
compile. No IO.

Used to answer a query while numba's cache lacks the search kernels (the first run after an
install): compiling them costs seconds, a scan of the blobs a fraction of one.

The blobs (``parsers.tokens.encode_counts``: a 16-byte header, ``n`` uint32 term ids, ``n``
counts of 1, 2 or 4 bytes) are joined with each one padded to a multiple of four bytes, so
that every blob's ids lie on 4-byte boundaries of the joined buffer: one vectorised compare
over it (``np.isin`` on a uint32 view) finds every word equal to a query term, and a word
counts only where it lies in its blob's ids (a count or a header can hold the same bits).
A blob's ids are distinct, so a term occurs in a document at most once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

_MAGIC = (84, 75, 1)  # b"TK", version 1 (parsers.tokens)
_PADS = [b"", b"\0\0\0", b"\0\0", b"\0"]  # by length % 4

I64Array = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True, eq=False)
class TokenScan:
    """Blobs joined for scanning: ``lengths`` (tokens a document) and ``hits``."""

    words: npt.NDArray[np.uint32]
    starts: I64Array
    """Each blob's first word in ``words`` (and one past the last blob)."""
    n_ids: I64Array
    widths: I64Array
    lengths: I64Array

    @classmethod
    def of(cls, blobs: list[bytes]) -> TokenScan:
        """``ValueError`` names the first blob that is not a token blob."""
        if not blobs:
            empty = np.empty(0, np.int64)
            return cls(np.empty(0, np.uint32), np.zeros(1, np.int64), empty, empty, empty)
        sizes = np.fromiter((len(b) for b in blobs), dtype=np.int64, count=len(blobs))
        short = sizes < 16
        if short.any():
            raise ValueError(f"token blob {int(np.flatnonzero(short)[0])} is not one (too short)")
        starts = np.zeros(len(blobs) + 1, dtype=np.int64)
        np.cumsum((sizes + 3) // 4, out=starts[1:])
        parts: list[bytes] = []
        for blob in blobs:
            parts.append(blob)
            parts.append(_PADS[len(blob) % 4])
        words = np.frombuffer(b"".join(parts), dtype="<u4")
        raw = words.view(np.uint8)
        first = starts[:-1] * 4
        flags = raw[first + 3]
        widths = np.select([flags == 2, flags == 1, flags == 0], [1, 2, 4], 0).astype(np.int64)
        n_ids = words[starts[:-1] + 1].astype(np.int64)
        low = words[starts[:-1] + 2].astype(np.int64)
        high = words[starts[:-1] + 3].astype(np.int64)
        bad = (raw[first] != _MAGIC[0]) | (raw[first + 1] != _MAGIC[1])
        bad |= (raw[first + 2] != _MAGIC[2]) | (widths == 0)
        bad |= sizes != 16 + n_ids * (4 + widths)
        if bad.any():
            where = int(np.flatnonzero(bad)[0])
            raise ValueError(f"token blob {where} is not one (parsers.tokens)")
        return cls(words, starts, n_ids, widths, low | (high << 32))

    @property
    def n_docs(self) -> int:
        return int(self.n_ids.size)

    def hits(self, terms: npt.NDArray[np.uint32]) -> tuple[I64Array, I64Array, I64Array]:
        """(document, index into ``terms``, term frequency) of each occurrence of a term,
        documents ascending, and within one its terms in the document's own token order."""
        where = np.flatnonzero(np.isin(self.words, terms))
        docs = np.searchsorted(self.starts, where, side="right") - 1
        place = where - self.starts[docs] - 4
        keep = (place >= 0) & (place < self.n_ids[docs])
        where, docs, place = where[keep], docs[keep], place[keep]
        term = np.searchsorted(terms, self.words[where]).astype(np.int64)
        width = self.widths[docs]
        at = self.starts[docs] * 4 + 16 + self.n_ids[docs] * 4 + place * width
        raw = self.words.view(np.uint8)
        tf = raw[at].astype(np.int64)
        for shift, wide in ((8, 2), (16, 4), (24, 4)):
            byte = raw[np.where(width >= wide, at + shift // 8, at)].astype(np.int64)
            tf |= np.where(width >= wide, byte << shift, 0)
        return docs.astype(np.int64), term, tf
