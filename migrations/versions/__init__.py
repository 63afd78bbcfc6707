"""Migration scripts; revision ids are short readable names (``0001_initial``, ``0002_...``)."""
