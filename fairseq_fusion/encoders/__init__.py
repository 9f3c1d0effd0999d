"""fairseq BPE/tokenizer encoders of the plugin (registered on import)."""
from . import prepared  # noqa: F401
