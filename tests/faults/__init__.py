"""Faults: crashes, I/O errors, outages, damaged files, hostile input, fuzzing, and lock holds under load."""
