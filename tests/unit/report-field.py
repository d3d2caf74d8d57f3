"""report-field.py REPORT EXPRESSION: prints a Python expression over a probe's JSON report,
bound to r (the shell tests that probe real programs check their reports with it)."""
import json
import sys

r = json.load(open(sys.argv[1]))
print(eval(sys.argv[2]))
