"""ksched command line: a thin typer layer over scheduler_runtime."""
