"""The kernel: what every stage and face of mdcr stands on, with no knowledge of the domain."""
