"""Exercise notebooks and their grader.

Run in the student's kernel (torch and stdlib only):

- ``checks``: the trusted check helpers a check cell calls;
- ``verdict``: the verdict line they print and the grader parses (the format's one home);
- ``guard``: the run-time form of an exercise's ``forbid`` rule (a TorchFunctionMode);
- ``lockdown``: the seccomp filter that stops the kernel from starting processes.

The grader (``course-grade``; needs the ``grading`` extra: nbformat, nbval, pytest, ipykernel):

- ``spec``: the notebook format (cell roles, exercises, checks, stubs);
- ``grade``: the stages of one grading (load, splice, run, collect, report), the batch and the CLI;
- ``notebooks`` (reading submissions, extracting answers), ``lint`` (the answer lint),
  ``runner`` (nbval passes, crash recovery), ``report`` (verdicts, scores, gradebook);
- ``sandbox``: the bubblewrap sandbox each grading runs in;
- ``nbval_plugin``: the pytest plugin the grader runs next to nbval.
"""
