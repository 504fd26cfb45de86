"""Exercise notebooks and their grader.

- ``checks``: the trusted check helpers a check cell calls (imports torch only: it runs in the
  student's kernel) and the verdict lines they print;
- ``spec``: the notebook format (cell roles, exercises, checks, stubs);
- ``grade``: the grader (``course-grade``; needs the ``grading`` extra: nbformat, nbval, pytest);
- ``nbval_plugin``: the pytest plugin the grader runs next to nbval.
"""
