"""The named architectures as fusion-archs shows them (read from the plugin's catalog, ``fairseq_fusion/models/
catalog.py``): the arch list, one arch's technique flags, which techniques combine, the README's table.
Its command-line entry point is ``fairseq_fusion_tools/cli/archs.py``.
"""
