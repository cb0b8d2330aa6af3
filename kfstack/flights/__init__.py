"""The flights domain: the delay model's raw-to-feature derivation and the flights pipelines' settings."""
