"""The golden-data search harness (eBay §4.2.2): golden sets and their importers, query sets, the
BM25 mini search over the catalog, its system metrics and report, and ``qcat golden``."""
