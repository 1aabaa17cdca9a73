"""The encoding pool's workers end by themselves after the work (exit code 0), so they release the
semaphores they made: terminated workers left them to the resource tracker, and ``encode --workers
2`` ended with a "leaked semaphore objects" warning."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def test_workers_end_normally_after_the_work(tiny_model_dir: Path, monkeypatch) -> None:
    from sentence_transformers import SentenceTransformer

    from babelspace.mining.pool import encoding_pool, pool_encode
    from babelspace.models.encoder import load_encoder

    exit_codes: list[int | None] = []
    stop = SentenceTransformer.stop_multi_process_pool

    def stop_spy(pool):  # type: ignore[no-untyped-def]
        exit_codes.extend(p.exitcode for p in pool["processes"])  # before it terminates what still runs
        stop(pool)

    monkeypatch.setattr(SentenceTransformer, "stop_multi_process_pool", staticmethod(stop_spy))
    model = load_encoder(str(tiny_model_dir), device="cpu")
    with encoding_pool(model, ["cpu"]) as pool:
        vectors = pool_encode(model, pool, ["a house", "a tree", "the sun"], batch_size=2)
    assert vectors.shape == (3, model.get_sentence_embedding_dimension())
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert exit_codes == [0]  # ended by itself; a terminated worker has none yet (then -15)
