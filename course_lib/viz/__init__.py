"""What chapters show: ``plotting`` (the course's figures, one style), ``widgets`` (explorers
with alt text), ``glue`` (numbers glued into the prose) and ``report`` (one-word agreement
verdicts). Imported by chapters, never by the
math: nothing outside ``viz`` imports it.
"""
