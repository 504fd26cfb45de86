"""The chapters' experiments: code a chapter runs to show something, not code a reader reuses.

One module per idea, named for what it holds: ``rnn`` (Ch. 1), ``matrices`` (Ch. 2),
``embeddings``, ``positions``, ``rope`` (Ch. 3), ``attention_scaling``, ``attention_cost``
(Ch. 4), ``backprop`` (Ch. 7). Labs may import the core modules (``course_lib.attention``, ...);
nothing in the core imports a lab.
"""
