"""fusion-benchmark: each arch against fairseq's stock ``transformer`` in the same run, on the same work.

``command`` (the parser, whose --help is its docstring, and ``main``: the interleaved runs, each in a fresh process,
``__main__``), ``measure`` (that process: training, forced-length decoding, FLOPs and operators), ``memory`` (the peak
memory of a training step), ``decode_profile`` (``--decode-profile``), ``report`` (the ratios and tables).
"""
