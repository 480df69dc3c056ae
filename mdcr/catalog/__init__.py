"""The catalog: the store's entries, who uses what, gc, and their words."""
