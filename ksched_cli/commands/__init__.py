"""One module per `ksched` command; each exposes `register(app)`, which ksched_cli.main calls.

A new command: add `commands/<name>.py` with the command function and `register`, and list it in
ksched_cli.main (the order there is the order of `ksched --help`). Commands raise KschedError subclasses
(scheduler_runtime.errors) or `guard.fail(...)`; the root group's error boundary turns them into one line
and an exit code, so a command never catches errors only to print them."""
