"""Readers (and writers) of the evaluation task files: BUCC, LASER Tatoeba, STS 2017 / STS-B and
released xsim++ files. Each error names the file and line."""
