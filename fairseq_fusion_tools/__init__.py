"""The tools around the plugin: the papers' analyses and scorers, the benchmark, the comparison of systems, the GPU
check, the recipes' settings and the ``fusion-*`` commands.

They import the plugin (``fairseq_fusion``, what ``--user-dir`` loads); the plugin never imports them.
``recipe_settings`` imports nothing of either at load time, so the recipes' shell steps read it quickly.
"""
