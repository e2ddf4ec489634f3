"""The portable backend: psutil (host) and pynvml (GPU) readers on a Python thread, for systems
without /proc or without the native extension."""
