"""Conformance case modules, one per op family; each defines cases(g)."""
