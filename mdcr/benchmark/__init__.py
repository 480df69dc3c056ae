"""The MDCR benchmark (paper section 4): construction, formats, ranking and scoring."""
