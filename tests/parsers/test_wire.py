"""parsers.wire: parse requests whose page bodies travel beside the pickle."""

from __future__ import annotations

import pickle

import pytest

from parsers import wire
from parsers.page import ParseJob
from parsers.worker import parse_batch


def _job(n: int, body: bytes | None) -> ParseJob:
    url = f"http://example.com/{n}"
    return ParseJob(url, url, 200, "text/html", None, body, depth=n)  # type: ignore[arg-type]


def test_bodies_travel_beside_the_pickle_and_come_back_as_bytes() -> None:
    jobs = [_job(n, bytes([n]) * 50_000) for n in range(3)]
    parts = wire.encode((parse_batch, (jobs,)))
    _count, _sizes, payload, *buffers = parts
    assert len(buffers) == 3 and [bytes(b) for b in buffers] == [j.body for j in jobs]
    assert len(payload) < 2_000  # the bodies are not in the pickle
    function, (decoded,) = wire.decode(b"".join(bytes(part) for part in parts))
    assert function is parse_batch
    assert decoded == jobs
    assert all(type(job.body) is bytes for job in decoded)


def test_a_message_of_the_wrong_size_is_refused() -> None:
    message = b"".join(bytes(part) for part in wire.encode([_job(1, b"<p>x</p>")]))
    with pytest.raises(ValueError, match="holds"):
        wire.decode(message + b"extra")


@pytest.mark.parametrize("protocol", range(2, pickle.HIGHEST_PROTOCOL + 1))
@pytest.mark.parametrize("body", [b"<title>t</title>", None])
def test_a_job_pickles_in_band_with_any_protocol(protocol: int, body: bytes | None) -> None:
    job = _job(2, body)
    again = pickle.loads(pickle.dumps(job, protocol=protocol))
    assert again == job and type(again.body) is type(body)
