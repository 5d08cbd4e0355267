"""The repository's own checks: the README, the generated reference and
pictures, the docs' examples and citations, benchmark tables, the layer rule
of imports, the test run's skip summary."""
