"""Stage 6, statistics: bootstrap intervals, paired significance tests."""
