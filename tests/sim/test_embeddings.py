"""The simulator's POST /v1/embeddings: OpenAI's shapes, exact usage, and its fixed latency
(ttft_ms + embed_token_ms per input token) as a lower bound a client can rely on."""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from sim.config import SimConfig
from sim.process import SimProcess, sim_process

TTFT_MS = 30.0
PER_TOKEN_MS = 0.5


@pytest.fixture(scope="module")
def embed_sim() -> Iterator[SimProcess]:
    config = SimConfig(port=0, ttft_ms=TTFT_MS, embed_token_ms=PER_TOKEN_MS, model="emb")
    with sim_process(config) as proc:
        yield proc


@pytest.fixture
async def client(embed_sim: SimProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=embed_sim.base_url, timeout=10.0) as c:
        (await c.get("/health")).raise_for_status()
        yield c


async def test_one_text_gets_one_unit_vector_and_its_token_count(
    client: httpx.AsyncClient,
) -> None:
    text = " ".join(["word"] * 100)
    started = time.perf_counter()
    response = await client.post("/v1/embeddings", json={"model": "emb", "input": text})
    elapsed_ms = (time.perf_counter() - started) * 1000.0
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "list"
    assert body["model"] == "emb"
    assert body["usage"] == {"prompt_tokens": 100, "total_tokens": 100}
    (item,) = body["data"]
    assert item["index"] == 0
    vector = item["embedding"]
    assert len(vector) == 8
    assert math.fsum(v * v for v in vector) == pytest.approx(1.0)
    # 30 ms + 100 tokens x 0.5 ms: never sooner, however idle or loaded the machine.
    assert elapsed_ms >= TTFT_MS + 100 * PER_TOKEN_MS


async def test_a_batch_of_texts_and_token_ids(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/embeddings", json={"input": ["a b c", "d e"], "dimensions": 3}
    )
    body = response.json()
    assert [d["index"] for d in body["data"]] == [0, 1]
    assert all(len(d["embedding"]) == 3 for d in body["data"])
    assert body["usage"]["prompt_tokens"] == 5
    ids = await client.post("/v1/embeddings", json={"input": [[1, 2, 3, 4], [5]]})
    assert ids.json()["usage"]["prompt_tokens"] == 5
    flat = await client.post("/v1/embeddings", json={"input": [7, 8, 9]})
    assert flat.json()["usage"]["prompt_tokens"] == 3
    assert len(flat.json()["data"]) == 1


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"model": "emb"}, 400, "input"),
        ({"input": []}, 400, "empty"),
        ({"input": "x", "encoding_format": "base64"}, 400, "float"),
        ({"input": "x", "model": "other"}, 404, "other"),
    ],
)
async def test_bad_requests_are_refused(
    client: httpx.AsyncClient, body: dict[str, object], status: int, says: str
) -> None:
    response = await client.post("/v1/embeddings", json=body)
    assert response.status_code == status
    assert says in response.json()["error"]["message"]
