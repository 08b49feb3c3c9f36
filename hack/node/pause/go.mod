module ksched.local/hack/node/pause

go 1.22
