"""The data contracts: files, facts, finished outputs, the paper's constants."""
