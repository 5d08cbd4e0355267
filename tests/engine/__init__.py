"""The port of the Go engine in process: the wire format, gojson, instants, the recorded traces and scenarios, and the engine's rules (cycles, invariants, admission outcomes, payload integers)."""
