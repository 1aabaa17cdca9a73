"""babelspace's objectives as sentence-transformers losses and its metrics as sentence-transformers
evaluators, for users of ``SentenceTransformerTrainer``."""
