"""Configuration: the schema, loading, validation and saving of config.toml, the organisation URL rules and the XDG paths."""
