"""The test harness: error model, comparison, framework selection and the summary table."""
