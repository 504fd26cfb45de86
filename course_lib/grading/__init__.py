"""Exercise notebooks and their grader.

Run wherever a check cell runs (a notebook in Jupyter or Colab, and the student's process of a
grading; torch and stdlib only):

- ``checks``: the check helpers a check cell calls, in one of four modes (live, student,
  checker, skip);
- ``verdict``: the verdict line a live check prints (the format's one home);
- ``guard``: the run-time form of an exercise's ``forbid`` rule (a TorchFunctionMode);
- ``wire``: plain data between the student's process and the checker (never pickle);
- ``lockdown``: the seccomp filter of a grading child (no new processes, no signals to others).

The grader (``course-grade``; needs the ``grading`` extra: nbformat, IPython, distributed):

- ``spec``: the notebook format (cell roles, exercises, checks, stubs);
- ``grade``: the stages of one grading (load, splice, run, collect, report), the batch and the CLI;
- ``notebooks`` (reading submissions safely, extracting answers), ``lint`` (the answer lint),
  ``runner`` (one grading: the student's process and the checker side by side, a pool of
  sandboxes), ``student`` (the sandboxed zygote and its per-exercise children), ``checker``
  (the trusted process that judges), ``report`` (verdicts, scores, gradebook);
- ``sandbox``: the bubblewrap sandbox the student's process runs in;
- ``cluster``: batches on a Dask cluster.

The design and what it protects against: ``exercises/README.md``, "Two processes per grading".
"""
