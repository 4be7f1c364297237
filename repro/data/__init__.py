"""Corpus, tokenizer, packing, LongRecipe's sentence selection (:mod:`repro.data.selection`) and synthetic training
data."""
