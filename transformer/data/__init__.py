"""What the models learn from: the toy tasks and their registry, SCAN, the other families'
toy data, text corpora with their vocabularies, and byte-pair encoding.  Nothing here
imports a model; a model is handed in where a function evaluates one."""
