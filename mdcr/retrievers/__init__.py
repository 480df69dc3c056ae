"""The retrievers as records: built-ins, options, identity, setups; no torch."""
