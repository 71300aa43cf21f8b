"""python -m tests.exercises.grade_pairs REQUEST.json: grade some exercises of some
submissions (the request: submissions {student: folder}, names {student: [exercise]},
timeout) and print [[student, exercise, result line]] as JSON."""
import json
import sys

from exercises.grading import grade
from tests.exercises.helpers import ROOT

if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        request = json.load(f)
    results = grade(ROOT, request["submissions"], request["names"], request["timeout"])
    print(json.dumps([[r.student, r.exercise, r.line()] for r in results]))
