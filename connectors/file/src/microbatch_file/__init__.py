"""File connectors for microbatch."""
