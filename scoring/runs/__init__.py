"""Run machinery: re-scoring and key-audit runs, from the Runs page and API to the
workers (services, tasks), with their budget, costs, estimate and retries.

Below scoring.board (which reads the runs' costs); above scoring's shared reads
(scoring.selectors) and models. Sends the board's refresh task by name.
"""
