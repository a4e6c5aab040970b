"""The FMI subsystem: FMI 2.0 and 3.0 bindings, the model description, extraction, and one object per instance."""
