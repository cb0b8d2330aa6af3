"""Watching data and models over time: drift of new data against what production was trained on."""
