"""parsers.tokens: the numba tokenizer equals the Python reference; ids, SimHash, binary form."""

from __future__ import annotations

import pickle
import random
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers.native import page_terms
from parsers.terms import fnv1a32, plain_terms, token_bytes, utf8
from parsers.tokens import (
    _FOLD,
    _TABLE_KEY,
    TokenCounts,
    _page_terms,
    _token_hashes,
    decode_counts,
    encode_counts,
    hamming64,
    query_ids,
    reference_simhash,
    reference_tokenize,
    simhash64,
    simhash_text,
    term_counts,
    token_id,
    tokenize,
    tokenize_and_simhash,
    tokenize_bytes,
)


def as_dict(tc: TokenCounts) -> dict[int, int]:
    return dict(zip(tc.ids.tolist(), tc.counts.tolist(), strict=True))


def assert_matches_reference(text: str) -> None:
    tc = tokenize(text)
    expected = reference_tokenize(text)
    assert tc.ids.dtype == np.uint32
    assert tc.counts.dtype == np.uint32
    assert tc.ids.size == len(set(tc.ids.tolist())), "ids must be distinct"
    assert as_dict(tc) == expected
    assert tc.length == sum(expected.values())


WORDY = st.text(
    alphabet=st.sampled_from("aZ9 _-.,!\n\téß漢😀\u00a0\x00Ab"),
    max_size=200,
)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_random_unicode_equals_reference(text: str) -> None:
    assert_matches_reference(text)


@settings(max_examples=200, deadline=None)
@given(WORDY)
def test_wordy_text_equals_reference(text: str) -> None:
    assert_matches_reference(text)


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=400))
def test_random_ascii_equals_reference(text: str) -> None:
    assert_matches_reference(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "!!! ... ,,, --- ;;; ()[]{} \n\t",
        "x" * 20_000,
        "0 1 2 3 42 007 3.14 1e10 2024-01-01",
        " ".join("abcdefghijklmnopqrstuvwxyz0123456789") * 50,  # many one-byte tokens
        " ".join(str(i) for i in range(5_000)),  # more distinct ids than the first guess holds
        "a\ud800b",  # a lone surrogate is kept (surrogatepass) and joins its neighbours
    ],
)
def test_edge_cases_equal_reference(text: str) -> None:
    assert_matches_reference(text)


def token_sequence(text: str) -> list[int]:
    """Every token's id, in order (the kernel's first step)."""
    return _token_hashes(np.frombuffer(utf8(text), dtype=np.uint8), _FOLD).tolist()  # type: ignore[no-any-return]


@settings(max_examples=300, deadline=None)
@given(WORDY)
def test_the_token_sequence_equals_the_reference_whatever_the_cut(text: str) -> None:
    """The kernel hashes the text's two halves at once, cut at the first separator from the
    middle on: the ids come out in order, none split or lost at the cut."""
    assert token_sequence(text) == [fnv1a32(t) for t in token_bytes(text)]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "a",
        " ",
        "ab",
        "a ",
        " a",
        "abcdefgh",  # no separator: one token, one chain
        "ab cd",  # the cut falls on the only separator
        "abc de",
        "a bcdefgh",  # the middle is inside a token: the cut moves to its end, or past it
        "abcdefg h",
        "      x",
        "x      ",
        "word " * 1000 + "end",
    ],
)
def test_the_token_sequence_at_the_edges_of_the_cut(text: str) -> None:
    assert token_sequence(text) == [fnv1a32(t) for t in token_bytes(text)]


@settings(max_examples=200, deadline=None)
@given(WORDY, st.integers(min_value=0, max_value=60))
def test_tokens_and_simhash_equal_the_plain_python_references(text: str, max_tokens: int) -> None:
    text = text * 3  # long enough for the shingle limit to cut
    counts, simhash = tokenize_and_simhash(text, max_tokens)
    assert as_dict(counts) == reference_tokenize(text)
    assert counts.length == sum(reference_tokenize(text).values())
    assert simhash == reference_simhash(text, max_tokens)


@pytest.mark.parametrize(
    "text", ["", "a b", "a b c", " ".join(str(i) for i in range(5_000)), "Ünïcode wörds, ok? " * 40]
)
def test_simhash_edges_equal_the_reference(text: str) -> None:
    assert simhash_text(text) == reference_simhash(text)
    assert tokenize_and_simhash(text)[1] == reference_simhash(text)


@settings(max_examples=200, deadline=None)
@given(WORDY, st.lists(st.sampled_from(["a", "ab", "zz", "9", "é", "ß漢", "b"]), max_size=4))
def test_page_terms_equal_the_separate_functions(text: str, words: list[str]) -> None:
    """The worker's one-call form equals encode_counts + simhash_text + term_counts."""
    text = text * 3
    query = tuple(token_id(w) for w in words)
    counts, simhash = tokenize_and_simhash(text)
    terms = page_terms(text, query)
    assert terms.blob == encode_counts(counts)
    assert terms.length == counts.length
    assert terms.simhash == simhash == reference_simhash(text)
    assert terms.query_tf == term_counts(counts, query)
    assert terms.query_tf == tuple(reference_tokenize(text).get(q, 0) for q in query)


@settings(max_examples=200, deadline=None)
@given(WORDY, st.lists(st.sampled_from(["a", "ab", "zz", "9", "é", "ß漢", "b"]), max_size=4))
def test_plain_terms_equal_the_kernel_byte_for_byte(text: str, words: list[str]) -> None:
    """The crawl process's plain-Python terms (its first pages) are a worker's exactly."""
    text = text * 3
    query = tuple(token_id(w) for w in words)
    terms = page_terms(text, query)
    assert plain_terms(text, query) == (terms.blob, terms.length, terms.simhash, terms.query_tf)


@pytest.mark.parametrize(
    "text",
    ["", "a", "a b", "a b c", "x " * 255, "x " * 256, "x " * 65_536 + "y", "w%d " * 3 % (1, 2, 3),
     " ".join(str(i) for i in range(6_000)), "Ünïcode wörds, ok? \udcff " * 40],
)  # fmt: skip
def test_plain_terms_at_the_edges(text: str) -> None:
    """Counts of 1, 2 and 4 bytes; fewer than 3 tokens (SimHash 0); the SimHash's token
    cut (4,096); a lone surrogate (encoded with surrogatepass, as the kernel's input is)."""
    terms = page_terms(text, (token_id("x"), token_id("y")))
    assert plain_terms(text, (token_id("x"), token_id("y"))) == tuple(terms)


@pytest.mark.parametrize("repeats", [255, 256, 65_535, 65_536])
def test_page_terms_blob_equals_encode_counts_at_every_count_width(repeats: int) -> None:
    """The kernel writes the blob itself, byte by byte: the same bytes as ``encode_counts``."""
    text = "spam " * repeats + "eggs ham spam"
    counts, _ = tokenize_and_simhash(text)
    assert page_terms(text).blob == encode_counts(counts)


def test_the_kernel_writes_no_blob_into_too_little_room() -> None:
    """``_page_terms`` says how much room a blob needs, and writes nothing, where ``out`` is
    shorter: ``page_terms`` sizes it from the text, so this never reaches a crawl."""
    data = np.frombuffer(b"spam eggs spam ham", dtype=np.uint8)
    wanted = np.array([token_id("spam")], dtype=np.uint32)
    need = 16 + 3 * (4 + 1)
    for room in (0, need - 1):
        out = np.full(room, 0xAA, dtype=np.uint8)
        found = np.zeros(1, dtype=np.uint32)
        assert _page_terms(data, _FOLD, 4096, wanted, _TABLE_KEY, out, found)[0] == -need
        assert (out == 0xAA).all() and found.tolist() == [0]
    out = np.zeros(need, dtype=np.uint8)
    found = np.zeros(1, dtype=np.uint32)
    size, total, _ = _page_terms(data, _FOLD, 4096, wanted, _TABLE_KEY, out, found)
    assert (size, total, found.tolist()) == (need, 4, [2])
    assert out.tobytes() == encode_counts(tokenize("spam eggs spam ham"))


def test_page_terms_of_counts_too_large_for_16_bits() -> None:
    terms = page_terms("spam " * 70_000 + "eggs", (token_id("spam"), token_id("ham")))
    assert terms.query_tf == (70_000, 0)
    back = decode_counts(terms.blob)
    assert dict(zip(back.ids.tolist(), back.counts.tolist(), strict=True)) == {
        token_id("spam"): 70_000,
        token_id("eggs"): 1,
    }
    assert len(terms.blob) == 16 + 2 * (4 + 4)  # 32-bit counts


@pytest.mark.parametrize("distinct", [1, 7, 2_048, 2_049, 5_000])
def test_counts_in_first_occurrence_order_however_many_ids(distinct: int) -> None:
    """The counting table starts with room for half the tokens as distinct ids and grows
    when a text has more (here: every word twice at most, up to all distinct); the ids come
    out in order of first occurrence, with their counts, and absent query ids count 0."""
    words = [f"w{i}" for i in range(distinct)]
    text = " ".join(words + words[: distinct // 3])
    terms = page_terms(text, (token_id("w0"), token_id("absent"), token_id(words[-1])))
    back = decode_counts(terms.blob)
    assert back.ids.tolist() == [token_id(w) for w in words]
    expected = reference_tokenize(text)
    assert back.counts.tolist() == [expected[token_id(w)] for w in words]
    assert terms.query_tf == (expected[token_id("w0")], 0, expected[token_id(words[-1])])


def test_token_rules() -> None:
    assert tokenize("").length == 0
    assert tokenize("").ids.size == 0
    assert tokenize("?!").length == 0
    assert tokenize("Hello HELLO hello").ids.size == 1
    assert tokenize("Hello HELLO hello").counts.tolist() == [3]
    assert tokenize("naïve café").length == 2  # non-ASCII bytes are letters
    assert tokenize("snake_case kebab-case").length == 4  # '_' and '-' separate
    assert tokenize("ÉCOLE école").ids.size == 2  # only ASCII is lower-cased
    assert tokenize("b a b").ids.tolist() == [token_id("b"), token_id("a")]  # first occurrence


def test_fnv1a_32_test_vectors() -> None:
    # Published FNV-1a 32-bit vectors (tokens are lower-cased first).
    assert token_id("a") == 0xE40C292C
    assert token_id("foobar") == 0xBF9CF968
    assert token_id("FooBar") == 0xBF9CF968


def test_ids_keep_all_32_bits() -> None:
    ids = tokenize(" ".join(f"w{i}" for i in range(2_000))).ids
    assert ids.size == 2_000
    assert int(ids.max()) >= 1 << 31  # a masked hash (e.g. 2^20 buckets) would never get here


def test_token_id_and_query_ids_agree_with_tokenize() -> None:
    doc = tokenize("The quick brown fox")
    assert token_id("QUICK") in doc.ids.tolist()
    q = query_ids("fox Fox the cat")
    assert q.dtype == np.uint32
    assert q.tolist() == [token_id("fox"), token_id("the"), token_id("cat")]
    assert query_ids("").size == 0


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_query_ids_equal_the_kernels_ids(text: str) -> None:
    """query_ids tokenizes in plain Python (the crawl process skips loading the kernel)."""
    q = query_ids(text)
    assert q.dtype == np.uint32
    assert q.tolist() == tokenize(text).ids.tolist()


@pytest.mark.parametrize("bad", ["", "  ", "two words", "a-b"])
def test_token_id_rejects_anything_but_one_token(bad: str) -> None:
    with pytest.raises(ValueError, match="exactly one token"):
        token_id(bad)


def test_tokenize_bytes_equals_tokenize() -> None:
    text = "Ünïcode and ASCII, 123"
    assert as_dict(tokenize_bytes(text.encode())) == as_dict(tokenize(text))


def test_token_counts_pickle() -> None:
    tc = tokenize("crosses the process pool pool")
    back = pickle.loads(pickle.dumps(tc))
    assert as_dict(back) == as_dict(tc)
    assert back.length == tc.length


# ---------------------------------------------------------------------------------------------
# SimHash


def zipf_words(rng: random.Random, vocab: list[str], n: int) -> list[str]:
    weights = [1.0 / (rank + 1) for rank in range(len(vocab))]
    return rng.choices(vocab, weights=weights, k=n)


def doc_hash(words: list[str]) -> int:
    tc = tokenize(" ".join(words))
    return simhash64(tc.ids, tc.counts)


def test_simhash_identical_docs() -> None:
    words = zipf_words(random.Random(1), [f"w{i}" for i in range(2_000)], 300)
    assert hamming64(doc_hash(words), doc_hash(words)) == 0
    assert hamming64(doc_hash(words), doc_hash(list(reversed(words)))) == 0  # a bag of words


@pytest.mark.parametrize("seed", range(20))
def test_simhash_one_word_changed(seed: int) -> None:
    rng = random.Random(seed)
    words = zipf_words(rng, [f"w{i}" for i in range(2_000)], 300)
    changed = list(words)
    changed[rng.randrange(len(words))] = "zzunseen"
    assert hamming64(doc_hash(words), doc_hash(changed)) <= 3


@pytest.mark.parametrize("seed", range(5))
def test_simhash_unrelated_docs(seed: int) -> None:
    rng = random.Random(seed)
    a = zipf_words(rng, [f"a{i}" for i in range(2_000)], 300)
    b = zipf_words(rng, [f"b{i}" for i in range(2_000)], 300)
    assert hamming64(doc_hash(a), doc_hash(b)) >= 16  # ~32 expected for independent hashes


def test_simhash_empty_and_shape_check() -> None:
    empty = tokenize("")
    assert simhash64(empty.ids, empty.counts) == 0
    with pytest.raises(ValueError):
        simhash64(np.zeros(2, np.uint32), np.zeros(3, np.uint32))


def test_hamming64() -> None:
    assert hamming64(0, 0) == 0
    assert hamming64(0, (1 << 64) - 1) == 64
    assert hamming64(0b1011, 0b0001) == 2


# ---------------------------------------------------------------------------------------------
# binary form


def test_encode_decode_round_trip_of_a_document() -> None:
    tc = tokenize("to be or not to be " * 10)
    blob = encode_counts(tc)
    assert len(blob) == 16 + tc.ids.size * (4 + 1)  # header + uint32 ids + uint8 counts
    back = decode_counts(blob)
    assert back.ids.dtype == np.uint32
    assert back.counts.dtype == np.uint32
    assert as_dict(back) == as_dict(tc)
    assert back.ids.tolist() == tc.ids.tolist()
    assert back.length == tc.length


@pytest.mark.parametrize(("top", "count_bytes"), [(1, 1), (255, 1), (256, 2), (65_535, 2),
                                                  (65_536, 4), (2**32 - 1, 4)])  # fmt: skip
def test_counts_take_the_narrowest_width_that_holds_the_largest(top: int, count_bytes: int) -> None:
    tc = TokenCounts(ids=np.array([7, 9], dtype=np.uint32),
                     counts=np.array([1, top], dtype=np.uint32), length=1 + top)  # fmt: skip
    blob = encode_counts(tc)
    assert len(blob) == 16 + 2 * (4 + count_bytes)
    assert decode_counts(blob).counts.tolist() == [1, top]


def test_blobs_stored_before_one_byte_counts_still_read() -> None:
    """Earlier versions wrote counts of 2 bytes (flag 1) or 4 (no flag) for every page."""
    ids, counts = [5, 6, 7], [3, 1, 2]
    for flags, dtype in ((1, "<u2"), (0, "<u4")):
        blob = (struct.pack("<2sBBIQ", b"TK", 1, flags, 3, 6) + np.array(ids, "<u4").tobytes()
                + np.array(counts, dtype).tobytes())  # fmt: skip
        back = decode_counts(blob)
        assert back.ids.tolist() == ids and back.counts.tolist() == counts and back.length == 6
    with pytest.raises(ValueError, match="flags"):
        decode_counts(struct.pack("<2sBBIQ", b"TK", 1, 3, 0, 0))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(1, 2**32 - 1)), max_size=50).map(dict)
)
def test_encode_decode_round_trip_of_any_counts(pairs: dict[int, int]) -> None:
    ids = np.array(list(pairs), dtype=np.uint32)
    counts = np.array(list(pairs.values()), dtype=np.uint32)
    tc = TokenCounts(ids=ids, counts=counts, length=sum(pairs.values()))
    back = decode_counts(encode_counts(tc))
    assert back.ids.tolist() == ids.tolist()
    assert back.counts.tolist() == counts.tolist()
    assert back.length == tc.length


@pytest.mark.parametrize(
    "blob",
    [b"", b"TK", b"XX" + bytes(14), encode_counts(tokenize("a b c"))[:-1], b"TK\x02" + bytes(13)],
)
def test_decode_rejects_foreign_or_truncated_blobs(blob: bytes) -> None:
    with pytest.raises(ValueError):
        decode_counts(blob)


def _mix64(x: np.ndarray) -> np.ndarray:
    """``parsers.tokens._mix64`` over an array (uint64 arithmetic wraps, as in the kernel)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _longest_run(table: np.ndarray) -> int:
    """The longest run of occupied entries of a counting table (what a probe may walk)."""
    occupied = np.concatenate(([0], (table != 0).astype(np.int8), [0]))
    edges = np.flatnonzero(np.diff(occupied))
    return int((edges[1::2] - edges[::2]).max()) if edges.size else 0


def test_words_chosen_to_collide_under_one_key_spread_under_another() -> None:
    """A token's id is public (FNV-1a), so words can be chosen whose slots all fall in one run
    of the counting table: under that key every new word walks the run (quadratic; a 1 MB
    text took seconds). The kernel's key is random in each process (``TABLE_KEY``): under
    any other key the same words spread as random ones do."""
    from parsers.tokens import _count

    cap = 1 << 14  # the table has 2 * cap = 2**15 entries
    known = np.uint64(12345)
    rng = np.random.default_rng(7)
    ids = rng.integers(0, 2**32, size=1 << 22, dtype=np.uint64)
    slots = _mix64(ids ^ known) >> np.uint64(64 - 15)
    chosen = np.unique(ids[slots < 256])[:cap]  # ~2**15 candidates fall there
    assert chosen.size == cap
    table, _, n = _count(chosen, cap, known)
    assert n == cap and _longest_run(table) >= cap  # one run of every id: the attack
    table, _, n = _count(chosen, cap, np.uint64(int.from_bytes(b"\x9c" * 8, "little")))
    assert n == cap and _longest_run(table) < 100  # load 1/2, random: runs of tens


def test_each_process_has_its_own_table_key() -> None:
    import subprocess
    import sys

    code = "from parsers.token_blob import TABLE_KEY; print(int(TABLE_KEY))"
    keys = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout for _ in range(2)}  # fmt: skip
    assert len(keys) == 2
