"""envyard inside other tools. Each module imports its tool itself, so envyard never needs them:
`harbor` — an environment for Harbor's `harbor run --env envyard.integrations.harbor:EnvyardEnvironment`."""
