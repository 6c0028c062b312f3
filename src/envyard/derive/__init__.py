"""`envyard derive`: agent tasks derived from verified setup images by breaking them on purpose (the environment,
or the project's code) and keeping only breakages that validation in forks proves fair and solvable."""
