"""What chapters show: ``plotting`` (the course's figures, one style), ``widgets`` (explorers
with alt text) and ``glue`` (numbers glued into the prose). Imported by chapters, never by the
math: nothing outside ``viz`` imports it.
"""
