"""`ksched completion bash|zsh|fish`: print the shell completion script, like `kubectl completion`."""

from __future__ import annotations

from typing import Annotated

import typer

SHELLS = ("bash", "zsh", "fish")

EPILOG = ("Examples:\n\n  source <(ksched completion bash)              # bash, this shell\n\n"
          "  ksched completion bash > /etc/bash_completion.d/ksched\n\n"
          "  ksched completion zsh > \"${fpath[1]}/_ksched\"   # zsh (compinit must run)\n\n"
          "  ksched completion fish > ~/.config/fish/completions/ksched.fish")


def register(app: typer.Typer) -> None:
    app.command("completion", epilog=EPILOG)(completion)


def _shell(value: str) -> str:
    if value not in SHELLS:
        raise typer.BadParameter(f"unsupported shell {value!r} (allowed: {', '.join(SHELLS)})")
    return value


def completion(
    shell: Annotated[str, typer.Argument(metavar="SHELL", callback=_shell, help="bash, zsh or fish.")],
) -> None:
    """Print the completion script for SHELL (completes commands, subcommands and options)."""
    from typer.completion import get_completion_script

    # always for `ksched` (also when run as `kubectl ksched`: a shell completes one word, and kubectl's own
    # plugin completion goes through a kubectl_complete-ksched executable, not this script)
    print(get_completion_script(prog_name="ksched", complete_var="_KSCHED_COMPLETE", shell=shell).rstrip("\n"))
