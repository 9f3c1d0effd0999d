"""Text in and out of the plugin: ``text_pipeline`` (torch-free: the tools' scorers import it) and ``prepared``,
the ``--bpe prepared`` encoder that the plugin's ``__init__`` registers with fairseq."""
