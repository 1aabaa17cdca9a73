"""What a run carries across steps and restarts: checkpoints and the resumable run state."""
