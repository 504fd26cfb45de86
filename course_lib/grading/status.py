"""The grader's statuses: the one home of their names (stdlib only).

An exercise of a submission is ``GRADED`` (its checks ran; its points count), ``TIMED_OUT``,
``CRASHED`` (its process died) or ``REJECTED`` (the static lint refused its answer). A
submission as a whole is ``GRADED``, ``UNREADABLE`` (not a notebook of this exercise set) or
``GRADER_ERROR`` (the grader failed: not the student's fault). A ``Status`` is a ``str``: it is
written to JSON, CSV and the messages between the grader's processes as its value, and a
value read back compares equal to it.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Status", "EXERCISE_STATUSES", "SUBMISSION_STATUSES"]


class Status(StrEnum):
    GRADED = "graded"
    TIMED_OUT = "timed out"
    CRASHED = "crashed"
    REJECTED = "rejected"
    UNREADABLE = "unreadable"
    GRADER_ERROR = "grader error"


#: what one exercise's grading ends as
EXERCISE_STATUSES = (Status.GRADED, Status.TIMED_OUT, Status.CRASHED, Status.REJECTED)
#: what a submission's report says
SUBMISSION_STATUSES = (Status.GRADED, Status.UNREADABLE, Status.GRADER_ERROR)
