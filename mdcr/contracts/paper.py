"""The constants of Medić & Šnajder (2022), defined once; every rule's default comes from here.

Sections 3 and 4 of the paper (``../shared/seeds/mdcr-paper.txt`` in the project's notes)
give the sampling rules; where each rule is applied is listed in docs/architecture.md.
"""

from __future__ import annotations

# Section 3, prefiltering S2ORC: a year, a non-empty title, an abstract of at least 30
# characters and at least 3 citations.
MIN_ABSTRACT_CHARS = 30
MIN_CITATIONS = 3

# Section 3.1: queries are papers of 2019, candidates are of 2019 or earlier.
QUERY_YEAR = 2019
# Section 3.1: 3,800 dataset-level queries; pools of 200k, 500k, 1M and 2M; 3 repetitions.
DATASET_QUERIES = 3800
DATASET_POOL_SIZES = (200_000, 500_000, 1_000_000, 2_000_000)
REPETITIONS = 3
# Section 3.2: 200 queries for each of the 19 MAG fields, pools of 100k.
FIELD_QUERIES = 200
FIELD_POOL_SIZE = 100_000
# Section 3: the top 500 candidates are retrieved and scored; k of R@k is 30 "since on
# average there are 29 positives (cited articles) for each query".
DEPTH = 500
RECALL_K = 30
CITED_PER_QUERY = 29

# The 19 MAG fields and their abbreviations (Appendix A.2, Table 5), in the paper's order.
FIELD_ABBREVIATIONS: dict[str, str] = {
    "Art": "Art",
    "Biology": "Bio",
    "Business": "Bus",
    "Chemistry": "Ch",
    "Computer Science": "CS",
    "Economics": "Eco",
    "Engineering": "Eng",
    "Environmental Science": "ES",
    "Geography": "Geog",
    "Geology": "Geol",
    "History": "His",
    "Materials Science": "MS",
    "Mathematics": "Mat",
    "Medicine": "Med",
    "Philosophy": "Phi",
    "Physics": "Phy",
    "Political Science": "PS",
    "Psychology": "Psy",
    "Sociology": "Soc",
}
MAG_FIELDS: tuple[str, ...] = tuple(FIELD_ABBREVIATIONS)

# Section 4.1, MDCR: 5 positives and 10 negatives of each type per query; model-based
# negatives from each model's top 200 on the field-level pools (BM25, SPECTER, SciNCL: the
# three with the lowest mean Jaccard index); the field's 200 most cited papers.
MDCR_POSITIVES = 5
MDCR_PER_TYPE = 10
MDCR_TOP_N = 200
MDCR_MOST_CITED_N = 200
# The three models are the built-in records with an MDCR negative role (BM25 first):
# mdcr.retrievers.builtin.MDCR_MODELS.
MDCR_FIXED_TYPES = ("graph", "most_cited", "random")
MDCR_POSITIVE = "true"
# Section 4.3: MDCR is scored with MAP and R@5 (five positives per query); mdcr adds nDCG.
MDCR_RECALL_K = 5

# Pool-size labels as the paper writes them.
SIZE_LABELS = {200_000: "200k", 500_000: "500k", 1_000_000: "1M", 2_000_000: "2M"}


def field_abbreviation(field: str) -> str:
    """The paper's abbreviation of a MAG field name (the name itself if it has none)."""
    return FIELD_ABBREVIATIONS.get(field, field)


def size_label(size: int) -> str:
    """Pool-size label as the paper writes it (200k, 1M), else a compact form."""
    if size in SIZE_LABELS:
        return SIZE_LABELS[size]
    if size >= 1_000_000 and size % 1_000_000 == 0:
        return f"{size // 1_000_000}M"
    if size >= 1000 and size % 1000 == 0:
        return f"{size // 1000}k"
    return str(size)
