"""The chapters' experiments: code a chapter runs to show something, not code a reader reuses.

One module per idea, named for what it holds (the list, by chapter: CONTRIBUTING.md, "Rooms").
Labs may import the core modules (``course_lib.attention``, ...); nothing in the core imports a
lab.
"""
