"""Rules: pure functions of (rule config, sample history, now) that return findings."""
