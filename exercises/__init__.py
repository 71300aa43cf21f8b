"""Graded exercises cut from this project's own code.

The solutions are the project's source: each exercise is one or more regions marked
`# BEGIN EXERCISE name` ... `# END EXERCISE` in the files that train the models, so an
exercise never drifts from the code that runs. `python -m exercises make DIR` writes a
student copy with the regions handed out cut (exercises/handout.py); `python -m exercises
check ... --project DIR` and `grade SUBMISSIONS/` grade copies with the teacher's code only
(exercises/grading.py), the checks in exercises/checks/. See docs/TEACHING.md.
"""
