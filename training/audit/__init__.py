"""qcat data audit: the leaves a training split cannot tell apart (shared texts, split clicks and a
fast model's cross-fitted confusions), ranked, with the report and confusable.tsv it writes."""
