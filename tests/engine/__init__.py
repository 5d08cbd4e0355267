"""The port of the Go engine, in process: the wire format, gojson, instants,
the recorded traces and the scenarios they cannot reach, and the engine's
rules (cycles, invariants, admission outcomes, retry races, payload integers)."""
