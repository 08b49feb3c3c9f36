// Command pause is the pod sandbox image of the node tests: it holds the pod's namespaces open and exits on
// SIGTERM or SIGINT. Built statically so the image is this one file (no registry is reachable in the tests).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	// as PID 1 of the sandbox it must also reap: with no children of its own, ignoring SIGCHLD does that
	signal.Ignore(syscall.SIGCHLD)
	<-stop
}
