"""Exercise notebooks and their grader.

The check helpers run wherever a check cell runs (a notebook in Jupyter or Colab, and both
processes of a grading; torch and stdlib only). The grader (``course-grade``, the ``grading``
extra) runs the student's code in a sandboxed process of its own and judges what it returns in
a trusted checker process. The modules are in CONTRIBUTING.md's map ("Rooms"); the design, and
what it protects against, in exercises/README.md ("Two processes per grading").
"""
