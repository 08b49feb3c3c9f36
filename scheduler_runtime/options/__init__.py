"""kube-scheduler's command line, resolved in the runtime (upstream: cmd/kube-scheduler/app/options).

`flags` parses kube-scheduler's flags Go-style; `resolve` turns them into a config and RunOptions and runs
the scheduler; `registry` builds the plugin registry for --plugin-dir. `ksched run` and the image's
`kube-scheduler` command both call these, so nothing here imports the CLI."""
