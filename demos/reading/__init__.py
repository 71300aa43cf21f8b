"""The reading edition: a traced training step written out as the code it ran (python -m demos.reading).

trace.py records a call with sys.settrace; steps.py says which calls; listing.py turns a
trace into functions in reading order; markdown.py and html.py write the two pages.
"""
