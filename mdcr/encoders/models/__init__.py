"""The encoder models: hub and folder models, Aspire, SPECTER2's adapter,
sentence-transformers, MTEB models, model objects, the random encoder."""
