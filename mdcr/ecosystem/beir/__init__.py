"""BEIR's file layout: one folder MTEB also reads, written from pools or MDCR, read as pools."""
