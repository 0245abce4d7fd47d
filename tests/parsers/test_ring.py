"""parsers.ring and the messages that travel in it: real shared memory, real worker processes."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import pickle
import random
import threading
from multiprocessing.connection import Pipe

import pytest

from crawler.pool.parse_pool import ParsePool
from parsers import wire
from parsers.html import parse_page
from parsers.page import Page, ParseJob
from parsers.ring import HEADER_BYTES, Ring, available
from parsers.terms import query_token_ids
from parsers.worker import parse_batch, send_parts

pytestmark = pytest.mark.skipif(not available(), reason="no memfd_create here")


def _message(ring: Ring, notice: bytes) -> bytes:
    start, size = ring.notice_of(notice)
    with ring.get(start, size) as view:
        data = bytes(view)
    ring.release(start, size)
    return data


def test_messages_come_back_in_order_and_the_ring_wraps_without_splitting_one() -> None:
    writer = Ring.create(HEADER_BYTES + 1000)
    reader = writer.shared().open()  # a second mapping of the same memory, as in a worker
    try:
        chance = random.Random(3)
        unread: list[tuple[bytes, bytes]] = []
        starts = []
        for n in range(300):
            parts = [bytes([n % 256]) * chance.randint(0, 40), b"", chance.randbytes(200)]
            notice = writer.put(parts, wire.size_of(parts))
            if notice is None:  # full: the reader catches up, then it fits
                while unread:
                    old, data = unread.pop(0)
                    assert _message(reader, old) == data
                notice = writer.put(parts, wire.size_of(parts))
            assert notice is not None
            start, size = reader.notice_of(notice)
            assert start % writer.capacity + size <= writer.capacity  # never split
            starts.append(start % writer.capacity)
            unread.append((notice, b"".join(parts)))
            if len(unread) > 2:  # a backlog of two or three messages, as in a crawl
                old, data = unread.pop(0)
                assert _message(reader, old) == data
        assert len(set(starts)) > 10  # it did go round
    finally:
        reader.close()
        writer.close()


def test_a_message_waits_for_room_then_fits_after_the_reader_gives_some_back() -> None:
    ring = Ring.create(HEADER_BYTES + 1000)
    try:
        first = ring.put([b"a" * 400], 400)
        second = ring.put([b"b" * 400], 400)
        assert first is not None and second is not None
        assert ring.put([b"c" * 400], 400) is None  # 800 of 1000 bytes unread
        assert ring.put([b"c" * 1001], 1001) is None  # never fits
        assert _message(ring, first) == b"a" * 400
        third = ring.put([b"c" * 400], 400)  # wraps: written at the start
        assert third is not None and ring.notice_of(third)[0] == 1000
        assert _message(ring, second) == b"b" * 400
        assert _message(ring, third) == b"c" * 400
    finally:
        ring.close()


def test_a_notice_of_what_was_given_back_or_out_of_bounds_is_refused() -> None:
    ring = Ring.create(HEADER_BYTES + 1000)
    try:
        notice = ring.put([b"x" * 10], 10)
        assert notice is not None
        _message(ring, notice)
        with pytest.raises(ValueError, match="no message"):
            ring.get(*ring.notice_of(notice))  # read and given back already
        with pytest.raises(ValueError, match="no message"):
            ring.get(995, 10)  # past the end
        ring.close()
        ring.close()  # again: nothing
    finally:
        ring.close()


def test_place_and_receive_in_the_ring_or_through_the_pipe() -> None:
    ring = Ring.create(HEADER_BYTES + 4096)
    try:
        small = ("small", b"x" * 100)
        placed = wire.place(wire.encode(small), ring)
        assert len(placed) == 1 and placed[0][:1] == wire.IN_RING  # only the notice travels
        assert wire.receive(b"".join(placed), ring) == small
        big = ("big", b"y" * 10_000)
        inline = wire.place(wire.encode(big), ring)  # no room: the message itself
        assert inline[0] == wire.INLINE
        assert wire.receive(b"".join(bytes(part) for part in inline), ring) == big
        assert wire.receive(b"".join(bytes(part) for part in inline), None) == big
        with pytest.raises(ValueError, match="kind"):
            wire.receive(b"Zjunk", ring)
        with pytest.raises(ValueError, match="kind"):
            wire.receive(b"".join(placed), None)  # a ring message without the ring
    finally:
        ring.close()


def _parsed(n: int) -> Page:
    body = (
        f"<title>t{n}</title><p>Visible text {n} with ünïcödé and an event loop</p>"
        f'<a href="/a{n}">event</a><script>hidden()</script>'
    ).encode()
    url = f"http://e.com/{n}"
    return parse_page(ParseJob(url, url, 200, "text/html", None, body,
                               query_terms=("event",), query_ids=query_token_ids("event")))  # fmt: skip


def test_a_page_sends_its_text_and_tokens_beside_the_pickle_and_gets_them_back() -> None:
    page = _parsed(1)
    assert page.text_encoded == (page.text, page.text.encode()) and page.tokens
    buffers: list[pickle.PickleBuffer] = []
    payload = pickle.dumps(page, protocol=5, buffer_callback=buffers.append)
    assert sorted(bytes(b.raw()) for b in buffers) == sorted([page.text.encode(), page.tokens])
    assert page.text.encode() not in payload and page.tokens not in payload
    again = pickle.loads(payload, buffers=[memoryview(bytes(b.raw())) for b in buffers])
    assert again == page
    assert type(again.text) is str and type(again.tokens) is bytes and again.text_encoded is None
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):  # in band: the same page
        inband = pickle.loads(pickle.dumps(page, protocol=protocol))
        assert inband == page and type(inband.text) is str and type(inband.tokens) is bytes


def test_a_page_decoded_in_the_ring_keeps_nothing_of_it() -> None:
    """The ring's bytes are written over once given back: a page read from it must hold
    copies (its text a str, its tokens bytes), never views of the ring."""
    ring = Ring.create(HEADER_BYTES + 64 * 1024)
    try:
        pages = [_parsed(n) for n in range(40)]
        got = []
        for page in pages:
            placed = wire.place(wire.encode([page]), ring)
            assert placed[0][:1] == wire.IN_RING
            got.extend(wire.receive(placed[0], ring))
            filler = wire.place(wire.encode(b"\xff" * 2000), ring)  # overwrite freed space
            wire.receive(filler[0], ring)
        assert got == pages
        assert all(type(p.text) is str and type(p.tokens) is bytes for p in got)
    finally:
        ring.close()


def test_send_parts_frames_as_send_bytes_does_and_writes_everything() -> None:
    """One ``writev`` of the parts; a pipe takes less than a large message at once, and
    the rest follows (partial writes): ``recv_bytes`` reads each message whole."""
    reader, writer = Pipe(duplex=False)
    messages = [[b"a"], [b"", b"bc", memoryview(b"def")], [os.urandom(3 << 20), b"tail"], [b""]]
    got: list[bytes] = []
    thread = threading.Thread(target=lambda: got.extend(reader.recv_bytes() for _ in messages))
    thread.start()
    for parts in messages:
        send_parts(writer, parts)
    thread.join(10)
    assert got == [b"".join(bytes(p) for p in parts) for parts in messages]
    reader.close()
    writer.close()


@pytest.mark.parametrize("ring_bytes", [0, 48 * 1024, 4 << 20], ids=["pipes", "tiny", "default"])
def test_workers_parse_the_same_pages_through_rings_of_any_size(ring_bytes: int) -> None:
    """Real workers: a tiny ring wraps many times and sends what does not fit through the
    pipe; none at all, everything goes through it. Every page equals its in-process parse."""
    jobs = []
    for n in range(120):
        body = (f"<title>{n}</title><p>" + f"word{n} " * (n * 40) + "</p>"
                + "".join(f'<a href="/p{n}/{k}">x</a>' for k in range(n % 7))).encode()  # fmt: skip
        jobs.append(
            ParseJob(f"http://e.com/{n}", f"http://e.com/{n}", 200, "text/html", None, body)
        )
    expected = parse_batch(
        [ParseJob(j.url, j.final_url, 200, "text/html", None, j.body) for j in jobs]
    )

    async def go() -> list[Page]:
        async with ParsePool(2, batch_max=8, ring_bytes=ring_bytes) as pool:
            got = await asyncio.gather(*(pool.parse(job) for job in jobs))
            assert all((w.reply_ring is None) == (ring_bytes == 0) for w in pool._live)
            return got

    got = asyncio.run(go())
    assert [(p.url, p.title, p.text, p.tokens, p.simhash) for p in got] == [
        (p.url, p.title, p.text, p.tokens, p.simhash)
        for p in expected  # type: ignore[union-attr]
    ]


def test_a_ring_read_as_fast_as_it_is_written_reuses_its_first_bytes() -> None:
    """The reader keeps up: every message starts at the beginning again, so the ring
    touches only the memory its largest backlog needs."""
    ring = Ring.create(HEADER_BYTES + 64 * 1024)
    try:
        offsets = set()
        for n in range(200):
            notice = ring.put([bytes([n % 256]) * 1000], 1000)
            assert notice is not None
            offsets.add(ring.notice_of(notice)[0] % ring.capacity)
            assert _message(ring, notice) == bytes([n % 256]) * 1000
        assert offsets == {0}
        first = ring.put([b"a" * 1000], 1000)  # a backlog: the next goes after it
        second = ring.put([b"b" * 1000], 1000)
        assert first is not None and second is not None
        assert ring.notice_of(second)[0] - ring.notice_of(first)[0] == 1000
        assert _message(ring, first) == b"a" * 1000 and _message(ring, second) == b"b" * 1000
    finally:
        ring.close()


def test_a_closed_pool_leaves_no_ring_open() -> None:
    """Crawls restart in one process any number of times: each pool's rings (two memfds a
    worker) are closed with it."""

    async def crawl_once() -> None:
        async with ParsePool(2) as pool:
            await asyncio.gather(*(pool.parse(_parsed_job(n)) for n in range(20)))
            assert all(w.reply_ring is not None for w in pool._live)
            assert rings(open_fds()) >= 4  # what the check below counts: two a worker

    def open_fds() -> dict[str, str]:
        gc.collect()  # what earlier tests left for the collector closes its fds now, not later
        fds = {}
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):  # the listing's own fd, closed by now
                fds[fd] = os.readlink(f"/proc/self/fd/{fd}")
        return fds

    def rings(fds: dict[str, str]) -> int:
        return sum("crawl-parse-ring" in target for target in fds.values())

    asyncio.run(crawl_once())  # the fork server and what it keeps open, once
    before = open_fds()
    for _ in range(3):
        asyncio.run(crawl_once())
    after = open_fds()
    assert rings(after) == rings(before)
    # Nor anything else a worker holds: a leak per worker would be 6 more after 3 pools of 2.
    # Threads of earlier tests open and close their own fds meanwhile (seen under CI: 2 more,
    # once 2 fewer), so a few either way are not this pool's.
    new = {fd: target for fd, target in after.items() if before.get(fd) != target}
    assert len(after) - len(before) < 6, new


def _parsed_job(n: int) -> ParseJob:
    return ParseJob(f"http://e.com/{n}", f"http://e.com/{n}", 200, "text/html", None,
                    f"<title>{n}</title><p>text {n}</p>".encode())  # fmt: skip


def test_only_bytes_travel_beside_the_pickle_other_buffers_stay_in_it() -> None:
    """A numpy array's unpickler keeps a view of its buffer: beside the pickle, in a ring,
    it would change when the ring's space is reused. It travels in the pickle instead."""
    import numpy as np

    ring = Ring.create(HEADER_BYTES + 4096)
    try:
        value = (np.arange(8), bytearray(b"ab"), b"x" * 100)
        parts = wire.encode(value)
        assert len(parts) == 3  # count, sizes, pickle: no buffer beside it
        got = wire.receive(wire.place(parts, ring)[0], ring)
        filler = wire.place(wire.encode(b"\xff" * 3000), ring)
        wire.receive(filler[0], ring)  # the freed space written over
        assert got[0].tolist() == list(range(8)) and got[1] == bytearray(b"ab")
    finally:
        ring.close()


def test_a_text_changed_after_the_parse_travels_as_changed() -> None:
    page = _parsed(2)
    page.text = "changed"
    buffers: list[pickle.PickleBuffer] = []
    payload = pickle.dumps(page, protocol=5, buffer_callback=buffers.append)
    assert pickle.loads(payload, buffers=buffers).text == "changed"
    assert pickle.loads(pickle.dumps(page, protocol=4)).text_encoded is None  # never kept


def test_a_ring_collected_unclosed_closes_its_descriptor() -> None:
    import gc

    fd = Ring.create(HEADER_BYTES + 4096).fd  # dropped at once, never closed
    gc.collect()
    with pytest.raises(OSError):
        os.fstat(fd)


def test_a_ring_too_small_for_its_header_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="ring_bytes"):
        ParsePool(1, ring_bytes=HEADER_BYTES)
