"""MTEB tasks run offline on a saved model from local copies of their data (``babelspace mteb``)."""
