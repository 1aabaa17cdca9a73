"""Metrics: arrays in, numbers out (xsim, xsim++, Tatoeba, BUCC, STS, MSE, geometry). Reading task
files is :mod:`babelspace.evaluation.formats`; running tasks on a model is :mod:`babelspace.evaluation`."""
