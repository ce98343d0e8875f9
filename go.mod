module github.com/cco-dev/cco

go 1.26.8

require (
	github.com/aymanbagabas/go-udiff v0.4.2
	github.com/google/renameio/v2 v2.0.2
	golang.org/x/sys v0.50.0
)
