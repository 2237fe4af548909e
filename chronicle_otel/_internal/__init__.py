"""Private helpers shared across chronicle_otel's subpackages."""
