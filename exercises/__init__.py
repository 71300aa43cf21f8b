"""Graded exercises cut from this project's own code.

The solutions are the project's source: each exercise is one or more regions marked
`# BEGIN EXERCISE name` ... `# END EXERCISE` in the files that train the models, so an
exercise never drifts from the code that runs. `python -m exercises make DIR` writes a
student copy with every region replaced by `raise NotImplementedError(...)`, and
`python -m exercises check NAME --project DIR` grades one (exercises/checks.py).
See docs/TEACHING.md.
"""
