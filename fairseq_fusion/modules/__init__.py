"""One small module per technique; each is switched on by flags of ``fusion_transformer``."""
