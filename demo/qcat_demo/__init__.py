"""qcat's demo data: a model bundle (``model/``) and a corpus (``corpus/``) built from public
product data under each source's own terms (NOTICE.md). qcat finds them through
``qcat.bundles.demo``; this package holds data only."""
