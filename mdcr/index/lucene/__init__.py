"""Lucene through pyserini: the JVM and one BM25 index per pool."""
