"""The retrievers as records: built-ins, options, built-in entries, setups; no torch."""
