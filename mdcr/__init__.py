"""mdcr: large-scale citation-recommendation evaluation of scientific-article encoders.

Rebuilds the experiments and the MDCR benchmark of Medić & Šnajder (2022),
"Large-scale Evaluation of Transformer-based Article Encoders on the Task of
Citation Recommendation".
"""

__version__ = "0.1.0"
