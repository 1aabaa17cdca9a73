"""Parts shared by objectives: KoLeo, token masking, cross-process gathering."""
