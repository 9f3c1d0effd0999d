"""fusion-compare: archs (and flag combinations) x seeds, one dataset, one budget, one table.

``command`` (the parser, whose --help is its docstring, and ``main``, the order of the steps), ``protocols`` (the
systems and how each paper trained and chose its checkpoint), ``commands`` (the fairseq-train / fairseq-generate argv,
the command a run folder records), ``training`` (the runs), ``evaluation`` (translation, BLEU, the paired bootstrap),
``table`` and ``figure`` (the results), ``budget`` (``--budget-from-curve``), ``parallel`` (``--jobs``).
"""
