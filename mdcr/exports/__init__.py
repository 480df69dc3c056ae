"""``mdcr export``'s formats: one registry keyed by format and input kind
(:mod:`mdcr.exports.registry`), filled by one registration next to each exporter."""
