"""The documentation generators: ANSWERS.md (``answers``, from the questions as data, ``questions``), the
plots (``plots``, ``trace_plot``) and the version matrix (``matrix``), each from a report. They run in a
checkout (``python -m docgen.answers``) and are not installed with the package."""
