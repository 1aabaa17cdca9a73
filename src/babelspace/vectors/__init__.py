"""Vectors on disk, in one store: shards with a manifest, checked (shape, dtype, finite unit
vectors, the bytes and sentences each was written from) and resumed shard by shard
(:class:`~babelspace.vectors.shards.ShardStore`). Mining keeps each side's embeddings in it and the
held-out table its baselines' vectors; both import it from below."""
