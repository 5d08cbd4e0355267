"""Faults: crashes at every step, I/O errors, outages, damaged files, hostile
input, fuzzing, and lock holds under load."""
