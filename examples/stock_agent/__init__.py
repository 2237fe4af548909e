"""The stock-trading agent demo: the failure chronicle_otel is built to make replayable."""
