"""Client-side helpers over confluent-kafka. ``reader`` reads a topic from a chosen position;
the semantics presets (at_most_once, at_least_once, exactly_once) arrive with consumer
groups and the idempotent producer."""
